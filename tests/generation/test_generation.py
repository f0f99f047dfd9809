"""Generation layer: error classification, backoff, prompts, LLM copies, calls, the generator."""

from __future__ import annotations

import asyncio
import email.utils
import random

import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from tests.helpers.retries import no_wait
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text, http_error
from uqlm_bert import (
    AuthenticationFailedError,
    ConfigurationError,
    InputValidationError,
)
from uqlm_bert.generation import RetryPolicy
from uqlm_bert.generation._backoff import backoff_cap
from uqlm_bert.generation._caller import LLMCaller
from uqlm_bert.generation._clients import derive_llm, llm_temperature, message_text
from uqlm_bert.generation._error_kinds import (
    MalformedReplyError,
    classify_exception,
    parse_retry_after,
)
from uqlm_bert.generation._event_loop import EventLoopThread
from uqlm_bert.generation._generator import ResponseGenerator
from uqlm_bert.generation._prompts import (
    fingerprint_prompt,
    fingerprint_run,
    to_messages,
    validate_prompts,
)
from uqlm_bert.generation._settings import GenerationSettings

FAST = no_wait(3)


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.25, recorder=Recorder(), **kwargs)


def generator(llm, **settings) -> ResponseGenerator:
    return ResponseGenerator(llm, GenerationSettings(**settings))


async def call_once(llm, messages, *, sample, sleep=None, **settings):
    """One slot through a fresh caller: ``(text, failure), caller``."""
    async with LLMCaller(llm, GenerationSettings(**settings), sleep=sleep) as caller:
        permit = await caller.acquire()
        texts, failure = await caller.call(messages, sample=sample, permit=permit)
        return (texts[0] if texts is not None else None, failure), caller


# --- error classification -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "retryable", "fatal"),
    [
        (400, "bad_request", False, False),
        (401, "auth", False, True),
        (403, "auth", False, True),
        (404, "bad_request", False, False),
        (408, "timeout", True, False),
        (422, "bad_request", False, False),
        (429, "rate_limit", True, False),
        (500, "server", True, False),
        (502, "server", True, False),
        (503, "server", True, False),
    ],
)
def test_classify_by_status_code(status, kind, retryable, fatal):
    info = classify_exception(http_error(status))
    assert (info.kind, info.retryable, info.fatal, info.status_code) == (
        kind,
        retryable,
        fatal,
        status,
    )


def test_classify_reads_retry_after_from_the_response_headers():
    assert classify_exception(http_error(429, retry_after="7")).retry_after == 7.0
    assert classify_exception(http_error(503, retry_after_ms="1500")).retry_after == 1.5


def test_classify_builtin_and_unknown_exceptions():
    assert classify_exception(TimeoutError()).kind == "timeout"
    assert classify_exception(asyncio.TimeoutError()).kind == "timeout"
    assert classify_exception(ConnectionResetError("reset")).kind == "connection"
    other = classify_exception(ZeroDivisionError("bug"))
    assert (other.kind, other.retryable, other.fatal) == ("other", False, False)
    assert classify_exception(MalformedReplyError("no text")).kind == "malformed"


def test_classify_follows_the_cause_chain():
    try:
        try:
            raise http_error(503)
        except Exception as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert classify_exception(outer).kind == "server"


def test_classify_real_openai_exceptions():
    openai = pytest.importorskip("openai")
    # the HTTP library this openai version builds its requests and responses with
    httpx = getattr(openai._base_client, "httpx2", None) or pytest.importorskip("httpx")
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")

    def status_error(cls, code, headers=None):
        response = httpx.Response(code, headers=headers or {}, request=request)
        return cls("scripted", response=response, body=None)

    rate = classify_exception(status_error(openai.RateLimitError, 429, {"retry-after": "3"}))
    assert (rate.kind, rate.retryable, rate.retry_after) == ("rate_limit", True, 3.0)
    assert classify_exception(status_error(openai.InternalServerError, 503)).kind == "server"
    assert classify_exception(status_error(openai.BadRequestError, 400)).kind == "bad_request"
    auth = classify_exception(status_error(openai.AuthenticationError, 401))
    assert auth.fatal and auth.kind == "auth"
    assert classify_exception(status_error(openai.PermissionDeniedError, 403)).fatal
    assert classify_exception(openai.APITimeoutError(request=request)).kind == "timeout"
    assert classify_exception(openai.APIConnectionError(request=request)).kind == "connection"


def test_classify_httpx_transport_errors():
    httpx = pytest.importorskip("httpx")
    assert classify_exception(httpx.ReadTimeout("slow")).kind == "timeout"
    assert classify_exception(httpx.ConnectError("refused")).kind == "connection"


def test_parse_retry_after_forms():
    assert parse_retry_after(None) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"Retry-After-Ms": "40"}) == 0.04
    assert parse_retry_after({"Retry-After": "-3"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30.0)
    assert (
        parse_retry_after({"Retry-After": email.utils.formatdate(now - 5, usegmt=True)}, now=now)
        == 0.0
    )


# --- backoff ----------------------------------------------------------------------------------


def test_backoff_is_bounded_by_the_exponential_cap():
    policy = RetryPolicy(max_retries=10, base_delay=0.5, max_delay=6.0)
    rng = random.Random(1)
    for k in range(10):
        cap = min(6.0, 0.5 * 2**k)
        assert backoff_cap(k, 0.5, 6.0) == cap
        delays = [policy.delay(k, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in delays)
        # full jitter: the draws spread over the interval rather than sitting at its top
        assert min(delays) < cap / 4 and max(delays) > 3 * cap / 4


def test_backoff_honours_retry_after_up_to_its_cap():
    policy = RetryPolicy(base_delay=0.0, max_delay=0.0, max_retry_after=10.0)
    assert policy.delay(0, retry_after=2.5) == 2.5
    assert policy.delay(3, retry_after=500.0) == 10.0


@pytest.mark.parametrize(
    "kwargs", [{"max_retries": -1}, {"max_retries": 1.5}, {"base_delay": -1}, {"max_delay": "x"}]
)
def test_retry_policy_rejects_bad_settings(kwargs):
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


# --- prompts ----------------------------------------------------------------------------------


def test_validate_prompts_accepts_strings_and_message_lists_and_copies():
    msgs = [SystemMessage(content="be brief"), HumanMessage(content="hi")]
    prompts = ["a", msgs, [("human", "tuple form")]]
    out = validate_prompts(prompts)
    assert out == prompts and out is not prompts


@pytest.mark.parametrize(
    ("prompts", "fragment"),
    [
        ("just one string", "not a single prompt"),
        ([], "empty"),
        (["ok", 3], "prompts[1]"),
        (["ok", []], "prompts[1]"),
        ([["not", "messages", 1.5]], "prompts[0]"),
        (42, "int"),
    ],
)
def test_validate_prompts_names_the_problem(prompts, fragment):
    with pytest.raises(
        InputValidationError, match=fragment.replace("[", r"\[").replace("]", r"\]")
    ):
        validate_prompts(prompts)


def test_to_messages_adds_the_system_prompt_once():
    assert [m.type for m in to_messages("q", "sys")] == ["system", "human"]
    assert [m.type for m in to_messages("q")] == ["human"]
    given = [SystemMessage(content="own"), HumanMessage(content="q")]
    out = to_messages(given, "sys")
    assert [m.content for m in out] == ["own", "q"]


def test_fingerprints_track_content_and_settings():
    assert fingerprint_prompt("q") == fingerprint_prompt([HumanMessage(content="q")])
    assert fingerprint_prompt("q") != fingerprint_prompt("q ")
    assert fingerprint_prompt("q") != fingerprint_prompt("q", system_prompt="s")
    fps = [fingerprint_prompt("a"), fingerprint_prompt("b")]
    assert fingerprint_run(fps, {"m": 1}) == fingerprint_run(list(fps), {"m": 1})
    assert fingerprint_run(fps, {"m": 1}) != fingerprint_run(fps[::-1], {"m": 1})


# --- LLM copies and reply text ----------------------------------------------------------------


def test_derive_llm_copies_and_leaves_the_original_alone():
    llm = scripted(max_retries=4)
    before = dict(llm.__dict__)
    hot = derive_llm(llm, temperature=1.3, disable_cache=True)
    same = derive_llm(llm)
    assert hot is not llm and same is not llm
    assert (hot.temperature, hot.max_retries, hot.cache) == (1.3, 0, False)
    assert (same.temperature, same.max_retries) == (0.25, 0)
    assert llm.__dict__ == before
    assert hot.recorder is llm.recorder  # shallow copy: shared client state


def test_derive_llm_binds_temperature_for_models_without_the_field():
    llm = ParrotFakeChatModel()
    copy = derive_llm(llm, temperature=0.9)
    assert copy.kwargs == {"temperature": 0.9}
    assert "temperature" not in type(llm).model_fields


def test_derive_llm_through_a_binding():
    llm = scripted()
    bound = llm.bind(temperature=0.4, stop=["x"])
    copy = derive_llm(bound, temperature=1.1)
    assert copy.kwargs == {"temperature": 1.1, "stop": ["x"]}
    assert bound.kwargs == {"temperature": 0.4, "stop": ["x"]}
    assert copy.bound.temperature == 1.1 and copy.bound.max_retries == 0
    assert llm.temperature == 0.25 and llm.max_retries == 2
    assert llm_temperature(bound) == 0.4


def test_derive_llm_switches_off_chatopenai_client_retries():
    langchain_openai = pytest.importorskip("langchain_openai")
    llm = langchain_openai.ChatOpenAI(
        model="m", api_key="k", base_url="http://127.0.0.1:9/v1", temperature=0.0, max_retries=3
    )
    copy = derive_llm(llm, temperature=1.0, disable_cache=True)
    assert copy.root_async_client.max_retries == 0 and copy.root_client.max_retries == 0
    assert copy.async_client is copy.root_async_client.chat.completions
    assert copy.client is copy.root_client.chat.completions
    assert (copy.temperature, copy.max_retries) == (1.0, 0)
    assert llm.root_async_client.max_retries == 3 and llm.max_retries == 3
    assert llm.temperature == 0.0


def test_message_text_forms():
    assert message_text(AIMessage(content="plain")) == "plain"
    assert message_text(AIMessage(content="")) == ""
    blocks = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, "b"]
    assert message_text(AIMessage(content=blocks)) == "ab"
    with pytest.raises(MalformedReplyError):
        message_text(AIMessage(content=[{"type": "image_url", "image_url": {}}]))
    with pytest.raises(MalformedReplyError):
        message_text(object())


# --- single calls -----------------------------------------------------------------------------


class SleepRecorder:
    def __init__(self):
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_caller_retries_transient_faults_then_succeeds():
    llm = scripted()
    llm.recorder.add_fault("q", http_error(503), http_error(429), TimeoutError("read timeout"))
    sleeper = SleepRecorder()
    (text, failure), caller = await call_once(
        llm, to_messages("q"), sample=True, retry=FAST, sleep=sleeper
    )
    assert (text, failure) == (answer_text("q", 1.0), None)
    assert len(llm.recorder.calls) == 4
    stats = caller.stats.as_dict()
    assert {k: stats[k] for k in ("attempts", "retries", "rate_limited")} == {
        "attempts": 4,
        "retries": 3,
        "rate_limited": 1,
    }
    assert stats["failures_by_kind"] == {}
    assert sleeper.waits == [0.0, 0.0, 0.0]


async def test_caller_waits_at_least_retry_after():
    llm = scripted()
    llm.recorder.add_fault(
        "q", http_error(429, retry_after="4"), http_error(503, retry_after_ms="250")
    )
    sleeper = SleepRecorder()
    policy = RetryPolicy(max_retries=5, base_delay=0.01, max_delay=0.01)
    (text, _), _ = await call_once(llm, to_messages("q"), sample=False, retry=policy, sleep=sleeper)
    assert text == answer_text("q", 0.25)
    assert sleeper.waits == [4.0, 0.25]


async def test_caller_gives_up_after_max_retries():
    llm = scripted()
    llm.recorder.add_fault("q", http_error(502), always=True)
    (text, failure), caller = await call_once(
        llm, to_messages("q"), sample=True, retry=FAST, sleep=SleepRecorder()
    )
    assert text is None
    assert (failure.kind, failure.attempts, failure.status_code) == ("server", 4, 502)
    assert len(llm.recorder.calls) == 4 and caller.stats.retries == 3


async def test_caller_does_not_retry_permanent_faults():
    llm = scripted()
    llm.recorder.add_fault("q", http_error(400), always=True)
    (text, failure), caller = await call_once(
        llm, to_messages("q"), sample=True, retry=FAST, sleep=SleepRecorder()
    )
    assert text is None and (failure.kind, failure.attempts) == ("bad_request", 1)
    assert len(llm.recorder.calls) == 1 and caller.stats.retries == 0


async def test_caller_stops_on_auth_failure():
    llm = scripted()
    llm.recorder.add_fault("q", http_error(401), always=True)
    with pytest.raises(AuthenticationFailedError, match="API key"):
        await call_once(llm, to_messages("q"), sample=True, retry=FAST, sleep=SleepRecorder())
    assert len(llm.recorder.calls) == 1


async def test_caller_times_out_hung_calls():
    llm = scripted()
    llm.recorder.add_fault("q", "hang", always=True)
    (text, failure), _ = await call_once(
        llm, to_messages("q"), sample=True, retry=no_wait(1), request_timeout=0.05
    )
    assert text is None and (failure.kind, failure.attempts) == ("timeout", 2)
    assert "request_timeout=0.05" in failure.message
    assert llm.recorder.in_flight == 0  # the abandoned calls were cancelled, not left running


async def test_caller_uses_the_original_temperature_and_the_sampling_temperature():
    llm = scripted()
    (original, _), _ = await call_once(
        llm, to_messages("q"), sample=False, sampling_temperature=0.8
    )
    (sample, _), _ = await call_once(llm, to_messages("q"), sample=True, sampling_temperature=0.8)
    assert (original, sample) == (answer_text("q", 0.25), answer_text("q", 0.8))
    assert llm.temperature == 0.25


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_calls_per_min": 0},
        {"max_calls_per_min": 2.5},
        {"max_concurrency": 0},
        {"request_timeout": -1},
        {"rate_limit_period": 0},
    ],
)
def test_settings_reject_bad_values(kwargs):
    with pytest.raises(ConfigurationError):
        GenerationSettings(**kwargs)


async def test_rate_limit_counts_every_attempt_in_a_sliding_window():
    llm = scripted()
    await llm.ainvoke("warm-up")  # first-call set-up stays out of the measured window
    llm.recorder.add_fault("p0", http_error(503))  # one retry: also rate-limited
    period, limit = 0.5, 3
    gen = generator(
        llm, max_calls_per_min=limit, rate_limit_period=period, retry=FAST, max_concurrency=8
    )
    result = await gen.generate([f"p{i}" for i in range(6)], 0, show_progress_bars=False)
    starts = sorted(c.started for c in llm.recorder.calls if c.prompt.startswith("p"))
    assert len(starts) == 7 and result.stats.attempts == 7
    # The throttle admits a call only when fewer than `limit` calls were admitted in the last
    # `period`; a call starts a moment after its admission, so windows get 50 ms slack. Without
    # the throttle all 7 calls would start within a few milliseconds.
    for i in range(len(starts) - limit):
        assert starts[i + limit] - starts[i] > period - 0.05
    # 7 calls at 3 per window need at least two full windows after the first call.
    assert starts[-1] - starts[0] >= 2 * period - 0.05


# --- the generator ----------------------------------------------------------------------------


def prompts_n(n: int) -> list[str]:
    return [f"question {i}" for i in range(n)]


async def test_generator_fills_every_slot_in_place():
    llm = scripted()
    gen = generator(llm, sampling_temperature=0.9, retry=FAST)
    prompts = prompts_n(5)
    result = await gen.generate(prompts, num_responses=3, show_progress_bars=False)
    assert result.responses == [answer_text(p, 0.25) for p in prompts]
    assert result.sampled_responses == [[answer_text(p, 0.9)] * 3 for p in prompts]
    assert result.stats.attempts == 5 * 4 and result.stats.succeeded == 20
    assert all(e is None for e in result.response_errors)


async def test_generator_failures_stay_in_their_own_slots():
    llm = scripted()
    rec = llm.recorder
    rec.add_fault("question 1", http_error(400), temperature=0.25, always=True)  # original fails
    rec.add_fault("question 3", http_error(503), temperature=1.0, always=True)  # every sample
    rec.add_fault("question 4", http_error(500))  # first call of prompt 4 fails once
    gen = generator(llm, retry=FAST, max_concurrency=3)
    prompts = prompts_n(6)
    result = await gen.generate(prompts, num_responses=3, show_progress_bars=False)
    for i, p in enumerate(prompts):
        if i != 1:
            assert result.responses[i] == answer_text(p, 0.25)
        if i != 3:
            assert result.sampled_responses[i] == [answer_text(p, 1.0)] * 3
    assert result.responses[1] is None and result.response_errors[1].kind == "bad_request"
    assert result.sampled_responses[1] == [answer_text("question 1", 1.0)] * 3
    assert result.responses[3] == answer_text("question 3", 0.25)
    assert result.sampled_responses[3] == [None, None, None]
    assert [e.kind for e in result.sample_errors[3]] == ["server"] * 3
    assert [e.attempts for e in result.sample_errors[3]] == [4] * 3
    assert result.num_failed_samples() == [0, 0, 0, 3, 0, 0]
    # 24 slots; prompt 1's original: 1 attempt; prompt 3's samples: 3 x 4 attempts;
    # prompt 4: one extra attempt. 24 - 3 + 12 + 1 = 34.
    assert result.stats.attempts == 34
    assert result.stats.retries == 3 * 3 + 1
    assert result.stats.failed == 4 and result.stats.succeeded == 20
    assert dict(result.stats.failures_by_kind) == {"bad_request": 1, "server": 3}


async def test_generator_result_does_not_depend_on_completion_order():
    prompts = prompts_n(12)
    plain = await ResponseGenerator(scripted()).generate(prompts, 4, show_progress_bars=False)
    jittery = scripted()
    jittery.recorder.latency_rng = random.Random(7)
    jittery.recorder.max_random_latency = 0.02
    jittery.recorder.slow = {"question 0": 0.1, "question 1": 0.05}
    done_order: list[int] = []
    shuffled = await generator(jittery, max_concurrency=20).generate(
        prompts, 4, on_prompt_done=lambda i, *_: done_order.append(i), show_progress_bars=False
    )
    assert done_order != sorted(done_order)  # prompts really finished out of order
    assert shuffled.responses == plain.responses
    assert shuffled.sampled_responses == plain.sampled_responses


async def test_generator_bounds_concurrency():
    llm = scripted(latency=0.02)
    gen = generator(llm, max_concurrency=4)
    await gen.generate(prompts_n(10), num_responses=2, show_progress_bars=False)
    assert llm.recorder.max_in_flight == 4


async def test_generator_reports_each_prompt_once_when_done():
    seen: list[tuple[int, str | None, list]] = []
    llm = scripted()
    llm.recorder.add_fault("question 2", http_error(400), temperature=1.0)
    gen = generator(llm, retry=FAST)
    prompts = prompts_n(4)
    result = await gen.generate(
        prompts, 2, on_prompt_done=lambda *a: seen.append(a), show_progress_bars=False
    )
    assert sorted(i for i, _, _ in seen) == [0, 1, 2, 3]
    for i, response, samples in seen:
        assert response == result.responses[i] and samples == result.sampled_responses[i]
    assert dict((i, s) for i, _, s in seen)[2].count(None) == 1


async def test_generator_only_samples_or_only_originals():
    llm = scripted()
    gen = ResponseGenerator(llm)
    samples = await gen.generate(["q"], 2, include_original=False, show_progress_bars=False)
    assert samples.responses == [None] and samples.sampled_responses == [
        [answer_text("q", 1.0)] * 2
    ]
    originals = await gen.generate(["q"], 0, show_progress_bars=False)
    assert originals.responses == [answer_text("q", 0.25)] and originals.sampled_responses == [[]]
    assert len(llm.recorder.calls) == 3


@pytest.mark.parametrize("m", [-1, 1.5, True, "3"])
async def test_generator_rejects_bad_num_responses(m):
    with pytest.raises(InputValidationError, match="num_responses"):
        await ResponseGenerator(scripted()).generate(["q"], m, show_progress_bars=False)


def test_generator_needs_a_chat_model():
    with pytest.raises(ConfigurationError, match="score"):
        ResponseGenerator(None)
    with pytest.raises(ConfigurationError, match="ainvoke"):
        ResponseGenerator("gpt-4")
    with pytest.raises(ConfigurationError, match="sampling_temperature"):
        generator(scripted(), sampling_temperature=-0.1)
    with pytest.raises(ConfigurationError, match="GenerationSettings"):
        ResponseGenerator(scripted(), {"max_concurrency": 4})


async def test_generator_uses_message_lists_and_the_system_prompt():
    llm = scripted()
    gen = generator(llm, system_prompt="Be brief.")
    conversation = [
        HumanMessage(content="hello"),
        AIMessage(content="hi"),
        HumanMessage(content="q"),
    ]
    snapshot = list(conversation)
    prompts = ["plain", conversation]
    await gen.generate(prompts, 1, show_progress_bars=False)
    assert conversation == snapshot and prompts == ["plain", conversation]
    sent = {c.prompt: [m.type for m in c.messages] for c in llm.recorder.calls}
    assert sent == {"plain": ["system", "human"], "q": ["system", "human", "ai", "human"]}


async def test_auth_failure_stops_the_run_and_leaves_no_tasks():
    llm = scripted(latency=0.01)
    llm.recorder.add_fault("question 3", http_error(401), always=True)
    gen = generator(llm, max_concurrency=4, retry=FAST)
    with pytest.raises(AuthenticationFailedError):
        await gen.generate(prompts_n(50), 3, show_progress_bars=False)
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert len(llm.recorder.calls) < 50 * 4  # it stopped early
    assert llm.recorder.in_flight == 0
    assert llm.temperature == 0.25 and llm.max_retries == 2


async def test_cancellation_leaves_no_tasks_running():
    llm = scripted(latency=0.01)
    gen = generator(llm, max_concurrency=4)
    task = asyncio.ensure_future(gen.generate(prompts_n(100), 3, show_progress_bars=False))
    await llm.recorder.until(lambda: len(llm.recorder.calls) >= 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert llm.recorder.in_flight == 0


def test_event_loop_thread_runs_every_call_on_one_loop_inside_or_outside_a_loop():
    runner = EventLoopThread()

    async def which_loop():
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    first = runner.run(which_loop)

    async def inside():  # as in Jupyter: a loop is already running in this thread
        return runner.run(which_loop)

    assert asyncio.run(inside()) is first and runner.run(which_loop) is first

    async def failing():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        runner.run(failing)
    runner.close()
    assert not runner.running and first.is_closed()


async def test_fake_list_chat_model_works_unchanged():
    llm = FakeListChatModel(responses=["x", "y"])
    result = await generator(llm, max_concurrency=1).generate(
        ["a", "b"], 1, show_progress_bars=False
    )
    # One worker, slots in order; the original-response copy and the sampling copy each walk
    # their own copy of the list, and the caller's fake is not advanced.
    assert result.responses == ["x", "y"] and result.sampled_responses == [["x"], ["y"]]
    assert llm.i == 0


def test_progress_bar_can_be_shown(capsys):
    async def go():
        return await ResponseGenerator(scripted()).generate(["q"], 1, show_progress_bars=True)

    asyncio.run(go())
    assert "Generating" in capsys.readouterr().err
