"""A report page as a real browser draws it: Debian's chromium, headless, to a PNG to look at.

    python benchmarks/report_screenshot.py demo_output/<time>_demo/report.html [--output page.png] [--height 6000]

Prints which sections the page shows and which it explains away, then the PNG's path. Without a chromium on PATH it
says so and exits 0 (apt-get install chromium). The page is opened as a file:// URL: a page that needed the network
would show broken pictures here.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

SECTION = re.compile(r'<section id="([^"]+)"><h2>([^<]+)</h2>(<p class=absent>([^<]*)</p>)?')


def sections(page: str) -> list[tuple[str, str | None]]:
    """(title, why absent or None) of every section, in order."""
    return [(match[2], match[4]) for match in SECTION.finditer(page)]


def screenshot(browser: str, page: Path, png: Path, width: int, height: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("page", type=Path, help="a report.html")
    parser.add_argument("--output", type=Path, help="the PNG (default: the page's name with .png)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=6000, help="pixels drawn from the top (default 6000)")
    args = parser.parse_args()
    for title, why in sections(args.page.read_text(encoding="utf-8")):
        print(f"{'absent' if why else 'shown '}  {title}{f': {why}' if why else ''}")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("no chromium on PATH: no screenshot (apt-get install chromium)")
        return 0
    png = args.output or args.page.with_suffix(".png")
    done = screenshot(browser, args.page, png, args.width, args.height)
    if not png.is_file():
        print(f"chromium drew nothing (exit {done.returncode}): {done.stderr.strip()[-500:]}", file=sys.stderr)
        return 1
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
