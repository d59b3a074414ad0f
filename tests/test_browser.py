"`make chromium` on a machine without root: where no Chromium is on PATH and apt-get cannot run, Playwright's own."
import subprocess, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
import browser  # noqa: E402

@pytest.fixture
def machine(monkeypatch):
    "A machine whose Chromium comes only from what install() runs: each call recorded, none run."
    ran, state = [], {'installed': None}
    monkeypatch.setattr(browser, 'chromium', lambda: state['installed'])
    def run(cmd, **kw):
        ran.append(cmd); state['installed'] = '/somewhere/chrome'
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(browser.subprocess, 'run', run)
    return ran, state, monkeypatch

def test_without_root_it_installs_playwrights_own(machine):
    ran, _, mp = machine
    mp.setattr(browser.os, 'geteuid', lambda: 1000)  # a laptop's user, apt-get present or not
    assert browser.install() == 0 and ran == [[sys.executable, '-m', 'playwright', 'install', 'chromium']]

def test_without_apt_it_installs_playwrights_own(machine):
    ran, _, mp = machine
    mp.setattr(browser.os, 'geteuid', lambda: 0)
    mp.setattr(browser.shutil, 'which', lambda name: None)  # root, but no apt-get: macOS, another distribution
    assert browser.install() == 0 and ran == [[sys.executable, '-m', 'playwright', 'install', 'chromium']]

def test_as_root_with_apt_it_installs_debians(machine):
    ran, _, mp = machine
    mp.setattr(browser.os, 'geteuid', lambda: 0)
    mp.setattr(browser.shutil, 'which', lambda name: '/usr/bin/apt-get' if name == 'apt-get' else None)
    assert browser.install() == 0 and ran[-1][:2] == ['apt-get', 'install'] and 'chromium' in ran[-1]

def test_one_already_there_is_kept(machine):
    ran, state, _ = machine
    state['installed'] = '/usr/bin/chromium'
    assert browser.install() == 0 and ran == []

def test_an_install_that_finds_none_fails_with_a_line(machine, capsys):
    ran, state, mp = machine
    mp.setattr(browser.os, 'geteuid', lambda: 1000)
    mp.setattr(browser.subprocess, 'run', lambda cmd, **kw: ran.append(cmd))  # it ran, yet nothing is there
    assert browser.install() == 1 and 'no Chromium found' in capsys.readouterr().err
