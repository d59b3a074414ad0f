"""`bert-nb` as the tests run it, some 150 times: each run a process of its own, forked from one that has imported
the command already, where starting `bert-nb` afresh spent a second importing torch every time. A run sees what
`bert-nb` sees: a fresh process, its arguments, working directory and environment, stdout and stderr that are not
a terminal; it ends with the status `main` returns, or the signal that stopped it. A test that needs another
environment before torch is imported, or signals or torchrun, starts `bert-nb` itself."""
import atexit, json, os, select, signal, subprocess, sys, tempfile, time, traceback
from pathlib import Path

EXE = Path(sys.executable).parent / 'bert-nb'
_server = None  # this process's forking server: (its Popen, requests, replies)

def run(*args, cwd=None, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    "`bert-nb *args` to its end, as `subprocess.run(..., capture_output=True, text=True)` returns it."
    args = [str(a) for a in args]
    if env is not None:  # read when torch is imported (ATEN_CPU_CAPABILITY, OMP_NUM_THREADS): a process of its own
        return subprocess.run([str(EXE), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    global _server
    if _server is None or _server[0].poll() is not None:
        (req_r, req_w), (rep_r, rep_w) = os.pipe(), os.pipe()
        proc = subprocess.Popen([sys.executable, __file__, str(req_r), str(rep_w)], pass_fds=(req_r, rep_w),
                                stdin=subprocess.DEVNULL)
        os.close(req_r); os.close(rep_w)
        _server = proc, os.fdopen(req_w, 'w'), rep_r
    _, requests, replies = _server
    with tempfile.TemporaryDirectory() as d:
        out, err = Path(d) / 'out', Path(d) / 'err'
        requests.write(json.dumps({'argv': args, 'cwd': str(cwd or os.getcwd()), 'env': dict(os.environ),
                                   'out': str(out), 'err': str(err)}) + '\n')
        requests.flush()
        pid = int(_reply(replies))
        status = _reply(replies, time.monotonic() + timeout)
        if status is None:
            os.kill(pid, signal.SIGKILL); _reply(replies)
            raise subprocess.TimeoutExpired([str(EXE), *args], timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess([str(EXE), *args], int(status), out.read_text(), err.read_text())

def _reply(fd: int, deadline: float | None = None) -> str | None:
    "The server's next line, read unbuffered from its pipe; None when the deadline passes first."
    line = b''
    while not line.endswith(b'\n'):
        if deadline is not None and not select.select([fd], [], [], max(0, deadline - time.monotonic()))[0]:
            return None
        c = os.read(fd, 1)
        if not c: raise RuntimeError("the tests' forking server stopped")
        line += c
    return line.decode()

def _serve(req_fd: int, rep_fd: int):
    "Import the command once; then for each request fork a child that runs it, and report its pid and status."
    sys.path[0] = str(EXE.parent)  # where the console script's directory would be, not tests/
    from bert_nb.command import main
    requests, replies = os.fdopen(req_fd, 'r'), os.fdopen(rep_fd, 'w')
    for line in requests:  # until the tests' process closes its end
        r = json.loads(line)
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close(); replies.close()
            os.chdir(r['cwd']); os.environ.clear(); os.environ.update(r['env'])
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, r['out'], os.O_WRONLY | os.O_CREAT),
                                    (2, r['err'], os.O_WRONLY | os.O_CREAT)):
                f = os.open(path, flags); os.dup2(f, fd); os.close(f)
            sys.argv = ['bert-nb', *r['argv']]
            try: code = main()  # as the console script's `sys.exit(main())`, and the interpreter's exit after it
            except SystemExit as e:
                if isinstance(e.code, str): print(e.code, file=sys.stderr)
                code = e.code if isinstance(e.code, int) else e.code is not None
            except BaseException: traceback.print_exc(); code = 1
            atexit._run_exitfuncs()
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
        replies.write(f'{pid}\n'); replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(f'{os.waitstatus_to_exitcode(status)}\n'); replies.flush()

if __name__ == '__main__': _serve(int(sys.argv[1]), int(sys.argv[2]))
