"""The Chromium that the page checks, the browser tests and bench/play.py drive, and `make chromium`, which gets one.

Where one comes from, in order: a system Chromium on PATH (`chromium`, `chromium-browser`); Debian's package, where
apt-get can install it (as root); Playwright's own build (`python -m playwright install chromium`, into the user's
cache, no root), as on macOS or a Linux laptop without root.
"""
import os, shutil, subprocess, sys
from pathlib import Path

def chromium() -> str | None:
    "The path of a Chromium to launch: the system's, else Playwright's installed one, else None."
    if found := shutil.which('chromium') or shutil.which('chromium-browser'): return found
    try:
        from playwright.sync_api import sync_playwright
        with sync_playwright() as pw: own = pw.chromium.executable_path  # where its build is, installed or not
    except Exception: return None  # no Playwright, or its driver cannot start here
    return own if Path(own).is_file() else None

def install() -> int:
    "Make chromium() find one: Debian's package as root with apt-get, Playwright's build otherwise."
    if chromium(): return 0
    if shutil.which('apt-get') and hasattr(os, 'geteuid') and os.geteuid() == 0:
        subprocess.run(['apt-get', 'update', '-qq'], check=True)
        subprocess.run(['apt-get', 'install', '-y', '-qq', 'chromium'], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'))
    else:
        print("no Chromium on PATH and no root for apt-get: installing Playwright's own Chromium (no root needed)")
        subprocess.run([sys.executable, '-m', 'playwright', 'install', 'chromium'], check=True)
    if chromium(): return 0
    print("make chromium: no Chromium found after installing one; put one on PATH as `chromium`", file=sys.stderr)
    return 1

if __name__ == '__main__':
    raise SystemExit(install() if sys.argv[1:] == ['--install'] else print(chromium() or ''))
