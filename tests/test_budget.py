"""--minutes as a budget, on an injected clock: a step, an evaluation and the plots each advance it by a set time, so a
machine that slows down mid-run, or stalls, is a test that runs in seconds and gives the same result every time."""
import json, os, warnings
from dataclasses import replace
from pathlib import Path
import pytest
import torch
import bert_nb.budget as budget, bert_nb.run as runs
from bert_nb.run import train
from bert_nb.data import prepare_data
from bert_nb.pretrain import RunArgs

LR, WARMUP, EVAL_S, PLOTS_S = 3e-3, 0.05, 1.0, 2.0
TINY = RunArgs(max_len=32, batch_size=8, d_model=32, layers=1, heads=2, d_ff=64, lr=LR, warmup=WARMUP, minutes=5.0,
               evals=10)

@pytest.fixture(scope='module')
def data(corpus, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp('budget') / 'data'
    prepare_data([corpus], d, vocab_size=300, say=lambda s: None)
    return d

class Clock:
    "Seconds that pass only when the run does something: `step_s(now, i)` per step i, EVAL_S per evaluation."
    def __init__(self, step_s, plots_s=PLOTS_S):
        self.t, self.step_s, self.plots_s, self.steps = 0.0, step_s, plots_s, []  # steps: (start, lr) of each

    def install(self, monkeypatch):
        step, evaluate, plots = runs._step, runs.evaluate, runs.write_plots
        def timed_step(loss_fn, opt, sched, *args):
            self.steps.append((self.t, opt.param_groups[0]['lr']))
            out = step(loss_fn, opt, sched, *args)
            self.t += self.step_s(self.t, len(self.steps)); return out
        def timed_eval(*a, **k):
            out = evaluate(*a, **k); self.t += EVAL_S; return out
        def timed_plots(*a, **k):
            plots(*a, **k); self.t += self.plots_s
        monkeypatch.setattr(budget, '_clock', lambda: self.t)
        for name, f in (('_step', timed_step), ('evaluate', timed_eval), ('write_plots', timed_plots)):
            monkeypatch.setattr(runs, name, f)
        return self

def budget_run(data, out, clock, resume=False, **kw) -> dict:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        train(replace(TINY, data=str(data), out=str(out), **kw), resume=resume, progress=False)
    m = json.loads((out / 'metrics.json').read_text())
    m['warnings'] = [str(x.message) for x in w if 'did not learn' not in str(x.message)]
    return m

def check_budget(m: dict, clock: Clock):
    "The whole budget used (98-100%), evaluations at tenths of it, and the learning rate as a function of time."
    train_s = 300 * (1 - budget.MARGIN) - budget.FINISH * EVAL_S  # finishing keeps FINISH evaluations back
    assert m['budget_s'] == 300 and m['used_s'] == pytest.approx(clock.t) and m['used'] == round(clock.t / 300, 4)
    assert 0.98 <= m['used'] <= 1.0 and m['warnings'] == []
    starts = [t for t, _ in clock.steps]
    ends = [t + clock.step_s(t, i) for i, t in enumerate(starts, 1)]
    assert train_s - 2 * clock.step_s(ends[-1], 0) <= ends[-1] <= train_s  # no step past what finishing needs
    assert m['steps'] == len(starts)
    # an evaluation at the first step boundary past each tenth of the training time (two tenths in one step: one)
    marks = [k / 10 * train_s for k in range(1, 10)]
    due = [b for a, b in zip([starts[0]] + ends, ends) if any(a < x <= b for x in marks)]
    assert [e['time_s'] - EVAL_S for e in m['eval'][1:]] == sorted(set(due) | {ends[-1]})
    for t, lr in clock.steps:  # linear warmup over 5% of the time, then linear decay to 0 at train_s
        share = t / train_s
        want = LR * (share / WARMUP if share < WARMUP else (1 - share) / (1 - WARMUP))
        assert lr == pytest.approx(want, rel=1e-12, abs=1e-18)
    assert clock.steps[-1][1] <= LR * 2 * clock.step_s(ends[-1], 0) / train_s / (1 - WARMUP) * (1 + 1e-12)  # ends near 0

def test_a_machine_that_halves_its_speed_mid_run_uses_the_whole_budget(data, tmp_path, monkeypatch):
    clock = Clock(lambda t, i: 0.5 if t < 150 else 1.0).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock)
    check_budget(m, clock)
    assert len(m['eval']) == 11 and 400 < m['steps'] < 460  # ~290 steps, then ~145: an outcome, not an input
    assert m['bf16'] == runs._native_bf16(torch.device('cpu'))  # a budget run: bf16 where it is native

def test_a_stall_does_not_end_the_run_early(data, tmp_path, monkeypatch):
    clock = Clock(lambda t, i: 40.0 if i == 100 else 0.5).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock)
    check_budget(m, clock)
    assert len(m['eval']) == 10 and m['steps'] > 480  # the 40 s step is one of the last 16: the run kept its pace of 0.5 s a step

def test_a_resumed_budget_run_equals_the_uninterrupted_one(data, tmp_path, monkeypatch):
    "The time between the two runs is not spent; the schedule, evaluations and weights continue exactly."
    whole = budget_run(data, tmp_path / 'whole', Clock(lambda t, i: 0.5).install(monkeypatch))
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        train(replace(TINY, data=str(data), out=str(tmp_path / 'parts')), stop_at=200, progress=False)
    assert sorted(os.listdir(tmp_path / 'parts')) == ['args.json', 'budget.json', 'resume.pt', 'vocab.txt']  # no model yet
    clock.t += 1000.0  # an hour later, say: none of it is the run's
    parts = budget_run(data, tmp_path / 'parts', clock, resume=True)
    assert parts['used_s'] == whole['used_s'] and parts['weight_digests'] == whole['weight_digests']
    assert [e['step'] for e in parts['eval'] if e['step'] != 200] == [e['step'] for e in whole['eval']]  # + the stop's

def test_a_finish_that_overruns_says_so(data, tmp_path, monkeypatch):
    clock = Clock(lambda t, i: 0.5, plots_s=30.0).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock)
    assert m['used'] > 1 and len(m['warnings']) == 1 and 'of its 300 s budget (10' in m['warnings'][0]

def test_a_budget_shorter_than_a_step_takes_one_and_says_so(data, tmp_path, monkeypatch):
    "7.2 s: 2.1 s left for steps once finishing (5 evaluations of 1 s, 1%) is kept back, and a step takes 5 s."
    clock = Clock(lambda t, i: 5.0).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock, minutes=0.12)
    assert m['steps'] == 1 and m['used'] > 1 and 'took longer than the run could foresee' in m['warnings'][0]
    assert 0 <= clock.steps[0][1] <= LR

def test_a_budget_too_short_to_train_is_refused_before_a_step(data, tmp_path, monkeypatch):
    """0.6 s, and finishing takes 5 evaluations of 1 s: no time is left for a step. It trained one at a negative
    learning rate (the share spent, 1 s of -4.4 s, was negative), and saved what that made (#43)."""
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    with pytest.raises(ValueError, match=r'--minutes 0.01 \(0.6 s\) is too short to train: finishing alone takes '
                                         r'about 5.1 s here \(5 evaluations of 1 s'):
        train(replace(TINY, data=str(data), out=str(tmp_path / 'run'), minutes=0.01), progress=False)
    assert clock.steps == [] and not (tmp_path / 'run' / 'resume.pt').exists()

def test_the_learning_rate_stays_in_0_to_peak_whatever_the_clock_says(data, tmp_path, monkeypatch):
    "A clock set back 30 s mid-run (NTP, say), 26 s in: the share spent goes negative, and the rate stays >= 0."
    clock = Clock(lambda t, i: -30.0 if i == 50 else 0.5).install(monkeypatch)
    budget_run(data, tmp_path / 'run', clock)
    lrs = [lr for _, lr in clock.steps]
    assert min(lrs) == 0 and max(lrs) <= LR and lrs[50] == 0  # the first step after the jump: share < 0

def test_steps_with_a_budget_stop_at_the_budget_and_say_so(data, tmp_path, monkeypatch):
    "--steps sets the schedule (as without a budget); the budget only ends the run early, and the run says so."
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock, steps=10_000)
    assert 0.98 <= m['used'] <= 1.0 and m['steps'] < 600
    assert len(m['warnings']) == 1 and f"ran out after {m['steps']} of --steps 10000" in m['warnings'][0]
    assert clock.steps[0][1] == pytest.approx(LR / 500)  # the step schedule: warmup over 5% of 10,000 steps
    assert m['bf16'] is False  # and float32, as every --steps run unless asked


def test_a_compiled_run_trains_as_the_eager_one(data, tmp_path):
    """--compile in float32, 3 steps: the first loss (the same weights, the same batch) within float32's error of the
    eager run's, every loss close, and metrics.json says it compiled."""
    from tol import loss_tol
    from bert_nb.bert import BertConfig
    runs = {}
    for compiled in (False, True):
        a = replace(TINY, data=str(data), out=str(tmp_path / str(compiled)), minutes=None, steps=3, evals=1,
                    compile=compiled)
        train(a, progress=False)
        runs[compiled] = json.loads((tmp_path / str(compiled) / 'metrics.json').read_text())
    assert runs[True]['compiled'] is True and runs[False]['compiled'] is False
    eager, fast = ([loss for _, _, loss in runs[k]['train']] for k in (False, True))
    cfg = BertConfig(**runs[True]['config'])
    assert abs(fast[0] - eager[0]) <= loss_tol(cfg, TINY.max_len, torch.float32, 10.0) + 1e-5  # + the 5 digits kept
    assert fast == pytest.approx(eager, abs=1e-3)

def test_a_run_that_cannot_compile_trains_eagerly_and_says_so(data, tmp_path, monkeypatch):
    "No C compiler here (inductor's, pointed at nothing): one warning, and the run is the eager run, bit for bit."
    import torch._inductor.config as inductor, torch._functorch.config as functorch
    monkeypatch.setattr(inductor.cpp, 'cxx', ('/nonexistent/c++',))
    for config, cache in ((inductor, 'fx_graph_cache'), (functorch, 'enable_autograd_cache')):
        monkeypatch.setattr(config, cache, False)  # a graph compiled before (on disk, or by the test above)
    torch._dynamo.reset()                             # would need no compiler
    runs = {}
    for compiled in (False, True):
        a = replace(TINY, data=str(data), out=str(tmp_path / str(compiled)), minutes=None, steps=3, evals=1,
                    compile=compiled)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            train(a, progress=False)
        said = [str(x.message) for x in w if 'torch.compile failed' in str(x.message)]
        runs[compiled] = json.loads((tmp_path / str(compiled) / 'metrics.json').read_text()), said
    (eager, none), (fell_back, said) = runs[False], runs[True]
    assert none == [] and len(said) == 1 and 'the run trains eagerly' in said[0] and 'C++ compiler' in said[0]
    assert fell_back['compiled'] is False and fell_back['train'] == eager['train']
    assert fell_back['weight_digests'] == eager['weight_digests']

class Killed(BaseException): "SIGKILL, as far as the run can tell: nothing after it runs."

def test_a_killed_run_resumed_keeps_the_budget(data, tmp_path, monkeypatch):
    """Killed 10 s after its last checkpoint and resumed, a run spends the budget as one would: the seconds since
    the checkpoint count (budget.json, at most BEAT_S of them lost), so the two processes together train for the
    budget and not for it plus what the kill cut off. Without it they used 110-113% (#43)."""
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    step = runs._step
    def killed_at_250(*a):
        if len(clock.steps) == 250: raise Killed()
        return step(*a)
    monkeypatch.setattr(runs, '_step', killed_at_250)
    with pytest.raises(Killed), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        train(replace(TINY, data=str(data), out=str(tmp_path / 'run')), progress=False)
    t_kill = clock.t
    checkpointed = torch.load(tmp_path / 'run' / 'resume.pt', weights_only=True)['spent']
    assert t_kill - checkpointed > 5  # what the checkpoint alone would lose
    monkeypatch.setattr(runs, '_step', step)
    clock.t += 1000.0  # the time between the runs: not the budget's
    t_resumed = clock.t
    m = budget_run(data, tmp_path / 'run', clock, resume=True)
    second = clock.t - t_resumed
    assert t_kill - budget.BEAT_S - 0.5 <= m['used_s'] - second <= t_kill  # the killed process's seconds, counted
    assert 0.98 <= m['used'] <= 1.0 and 0.98 * 300 <= t_kill + second <= 300  # both processes: the budget

def test_a_stall_near_the_end_is_not_taken_for_the_pace(data, tmp_path, monkeypatch):
    """A 25 s stall at 250 s, 17 s before the 292 s of steps end: the median of the last 16 steps is still 0.5 s, so
    the run trains on to the end (#43); the stalled step taken for the pace would have stopped it at 275 s (93%)."""
    clock = Clock(lambda t, i: 25.0 if 250 <= t < 250.5 else 0.5).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock)
    check_budget(m, clock)
    assert any(s > 280 for s, _ in clock.steps)  # steps after the stall

@pytest.mark.parametrize('spent', ['-1', 'Infinity', 'NaN', 'true', '"12"', '1e400'])
def test_a_resume_refuses_a_budget_json_that_holds_no_seconds(data, tmp_path, monkeypatch, spent):
    "budget.json's seconds count on resume, so what cannot be seconds spent (negative, inf, NaN, a bool) is refused."
    Clock(lambda t, i: 0.5).install(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        train(replace(TINY, data=str(data), out=str(tmp_path / 'r')), stop_at=20, progress=False)
    (tmp_path / 'r' / 'budget.json').write_text(f'{{"spent": {spent}}}\n')
    with pytest.raises(ValueError, match='budget.json (is not valid JSON|does not hold the seconds a run spent)'):
        train(replace(TINY, data=str(data), out=str(tmp_path / 'r')), resume=True, progress=False)

def test_a_steps_run_reads_no_budget_json(data, tmp_path, monkeypatch):
    "A --steps run keeps no budget.json, so one planted in its directory is not its time on resume."
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    steps = replace(TINY, minutes=None, steps=40, data=str(data), out=str(tmp_path / 's'))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        train(steps, stop_at=20, progress=False)
        assert not (tmp_path / 's' / 'budget.json').exists()
        (tmp_path / 's' / 'budget.json').write_text('{"spent": 1e9}\n')
        train(steps, resume=True, progress=False)
    m = json.loads((tmp_path / 's' / 'metrics.json').read_text())
    assert m['wall_s'] <= clock.t  # the run's own seconds, not 10**9

def test_steps_beside_a_budget_end_the_run_when_reached_first(data, tmp_path, monkeypatch):
    "--steps 30 with five minutes that would hold hundreds of steps: 30 steps, and the budget's time mostly unspent."
    clock = Clock(lambda t, i: 0.5).install(monkeypatch)
    m = budget_run(data, tmp_path / 'run', clock, steps=30)
    assert m['steps'] == 30 and len(clock.steps) == 30 and m['used'] < 0.2
