#!/bin/bash
# Stand-in for the CUDA image's entry point: its banner, then the command (the real one also checks the driver).
echo "== CUDA (stand-in base for docker/test_image.sh: no CUDA inside) =="
if [[ $# -eq 0 ]]; then exec bash; fi
exec "$@"
