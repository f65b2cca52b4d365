"""Progress off a terminal: whole lines, never a redrawn ``\\r`` bar; short work stays quiet."""

import io
import time

from audit.runtime import progress


def _run(monkeypatch, steps: int, pause: float) -> str:
    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(progress.sys, "stderr", err)
    with progress.bar(total=steps, desc="TRIR training, epoch 1/1", unit="batch") as b:
        for _ in range(steps):
            time.sleep(pause)
            b.update(1)
    return err.getvalue()


def test_long_work_prints_periodic_lines_and_a_final_one(monkeypatch):
    out = _run(monkeypatch, steps=6, pause=0.2)
    assert "\r" not in out
    lines = out.splitlines()
    assert len(lines) >= 2 and all(line.startswith("TRIR training, epoch 1/1: ") for line in lines)
    assert lines[-1].startswith("TRIR training, epoch 1/1: 6/6 [")
    assert "batch" in lines[-1]


def test_short_work_prints_nothing(monkeypatch):
    assert _run(monkeypatch, steps=3, pause=0.0) == ""


def test_disabled_bar_prints_nothing_even_when_slow(monkeypatch):
    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    for _ in progress.bar(range(3), desc="x", enabled=False):
        time.sleep(0.3)
    assert err.getvalue() == ""


def test_stage_lines_name_the_step_and_its_time(monkeypatch, capsys):
    with progress.stage("loading the LLM qwen"):
        pass
    err = capsys.readouterr().err.splitlines()
    assert err[0].strip() == "loading the LLM qwen ..."
    assert err[1].strip().startswith("loading the LLM qwen: done in ") and err[1].endswith("s")


def test_trir_background_preparation_shows_progress(monkeypatch):
    """TRIR's spaCy masking and curation of the background took minutes in silence (issue 46)."""
    from types import SimpleNamespace

    from attackers.trir.texts import masked_copies

    class SlowSpacy:  # the pipeline's shape, a document every 0.15 s
        nlp = SimpleNamespace(Defaults=SimpleNamespace(stop_words=set()))

        def pipe(self, texts):
            for t in texts:
                time.sleep(0.15)
                yield SimpleNamespace(text=t, ents=[], __iter__=None)

    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    texts = [f"text {i}" for i in range(8)]
    assert masked_copies(SlowSpacy(), texts, ["label"], progress="TRIR background: masking entities") == [texts]
    lines = err.getvalue().splitlines()
    assert lines and lines[-1].startswith("TRIR background: masking entities: 8/8 [")
    err.truncate(0)
    err.seek(0)
    masked_copies(SlowSpacy(), texts, ["label"], progress=False)
    assert err.getvalue() == ""


def test_by_default_a_stage_longer_than_ten_seconds_says_how_far_it_has_come(monkeypatch):
    """Issue 46: every stage over 10 s says what it does and how far it has come, in a log too."""
    monkeypatch.delenv("ANONAUDIT_PROGRESS_SECONDS", raising=False)
    assert progress._interval() == 10.0


def test_an_llm_bar_says_what_the_requests_are_for(monkeypatch, tmp_path):
    """A bare "LLM: 8/8" left a log reader guessing which stage ran (issue 46)."""
    from audit.models.answer_cache import CachedLLM
    from audit.models.llm import ChatRequest, ScriptedLLM

    def slow(request):
        time.sleep(0.2)
        return "yes"

    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    llm = CachedLLM(ScriptedLLM(slow, identity="s"), tmp_path / "c.sqlite")
    requests = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(5)]
    assert llm.complete_batch(requests, progress="claim linker, judging leakage") == ["yes"] * 5
    assert err.getvalue().splitlines()[-1].startswith("LLM: claim linker, judging leakage: 5/5 [")


def test_a_bar_says_how_far_it_has_come_while_no_item_finishes(monkeypatch):
    """Issue 57: spaCy's first batch of long judgments, or one slow step, finished no item for tens of
    seconds and the log said nothing; a line comes every interval all the same, then the last one."""
    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)

    def slow():
        time.sleep(1.3)  # the first item only after more than two intervals
        yield from (1, 2)

    seen = []
    for item in progress.bar(slow(), total=2, desc="span guess: spaCy over the background", unit="doc"):
        seen.append(err.getvalue())
    assert "span guess: spaCy over the background: 0/2 [" in seen[0]  # said before any item came
    assert err.getvalue().splitlines()[-1].startswith("span guess: spaCy over the background: 2/2 [")
    time.sleep(0.7)
    closed = err.getvalue()
    time.sleep(0.6)
    assert err.getvalue() == closed  # a closed bar is silent


def test_the_parse_cache_says_it_loads_spacy_before_its_first_batch(monkeypatch, capsys):
    """Loading spaCy (10-40 s cold) came before the parse's progress bar, in silence."""
    from types import SimpleNamespace

    from audit.models.parses import ParseCache

    class ColdSpacy:
        model, loaded = "en_core_web_sm", False

        @property
        def nlp(self):
            return SimpleNamespace(Defaults=SimpleNamespace(stop_words=set()))

        def pipe(self, texts, batch_size=64):
            raise RuntimeError("parsing starts")  # only what comes before the parse is looked at

    import pytest

    cache = ParseCache(ColdSpacy(), False, tokens=False, who="test")
    with pytest.raises(RuntimeError, match="parsing starts"):
        cache.parse(["a text"], progress="TRIR background: spaCy")
    assert "loading spaCy (en_core_web_sm) ..." in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="parsing starts"):
        cache.parse(["another text"])  # no progress asked: nothing said
    assert capsys.readouterr().err == ""


def test_the_utility_metrics_parse_of_the_originals_shows_progress(monkeypatch):
    """spaCy over every original for precision and recall (127 TAB judgments: a minute or more) had no bar."""
    from types import SimpleNamespace

    from audit.metrics.tae import parses

    def pipe(texts):
        for t in texts:
            time.sleep(0.3)
            yield t.upper()

    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    ctx = SimpleNamespace(memo={}, spacy=SimpleNamespace(pipe=pipe), progress=True,
                          originals={f"d{i}": SimpleNamespace(text=f"text {i}") for i in range(4)})
    assert parses(ctx, ["d0", "d1", "d2", "d3"]) == ["TEXT 0", "TEXT 1", "TEXT 2", "TEXT 3"]
    assert err.getvalue().splitlines()[-1].startswith("utility: spaCy over the originals: 4/4 [")


def test_a_bar_nobody_holds_stops_its_heartbeat(monkeypatch):
    import gc

    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    b = progress.bar(total=3, desc="left open", unit="doc")
    time.sleep(0.7)
    assert "left open: 0/3" in err.getvalue()  # the heartbeat spoke
    del b
    gc.collect()
    said = err.getvalue()
    time.sleep(1.2)
    assert err.getvalue() == said  # collected: no more lines


def test_span_guessing_says_how_far_the_lemmas_of_its_guesses_have_come(monkeypatch):
    """Issue 57: on a whole TAB release the guesses' lemmas (tens of thousands of strings) were 20-35 s
    without a line, between the looks and at the end."""
    from attackers.span_guess.matcher import Matcher

    class SlowSpacy:
        def pipe(self, texts, batch_size=256):
            for _ in texts:
                time.sleep(0.2)
                yield []  # a document without tokens

    monkeypatch.setenv("ANONAUDIT_PROGRESS_SECONDS", "0.5")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.5)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    matcher = Matcher(nlp=SlowSpacy())
    matcher.analyse_many(["Warsaw", "Paris", "Rome", "Oslo", "Paris"], progress="span guess: the guesses' lemmas")
    assert err.getvalue().splitlines()[-1].startswith("span guess: the guesses' lemmas: 4/4 [")
    assert matcher.analyse_many(["Bern"]) is None and "Bern" in matcher._memo  # no bar asked: none
