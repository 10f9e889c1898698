#!/bin/sh
# Usage (in a Dockerfile RUN with --mount=type=secret,id=ca_bundle): with-build-ca COMMAND [ARG ...]
# Runs COMMAND trusting the system's CA certificates plus the extra bundle given to the build as the secret
# "ca_bundle" (build_image.sh --ca-bundle FILE), if any: for TLS-intercepting proxies. The combined bundle lives in a
# temporary file that is removed afterwards, so no layer keeps it.
set -eu
secret="${BUILD_CA_SECRET:-/run/secrets/ca_bundle}"
system="${SYSTEM_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [ ! -s "${secret}" ]; then exec "$@"; fi
bundle="$(mktemp)"
trap 'rm -f "${bundle}"' EXIT
cat "${system}" "${secret}" > "${bundle}"
export PIP_CERT="${bundle}" REQUESTS_CA_BUNDLE="${bundle}" SSL_CERT_FILE="${bundle}"
"$@"
