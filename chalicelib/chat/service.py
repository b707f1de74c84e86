"""Chats: a grounded answer per request, kept in the workspace's region.

One answer, in order: validate (nothing is stored for bad input) -> retrieve the passages the caller
may read (``knowledge/service.search``) -> route (``models/routing.choose``: residency, role
allow-list, capability, preference; a refusal stores nothing) -> complete -> check links and images
(``chat/answer_output``) -> verify citations (``knowledge/citations.verify``) -> store, in ONE
transaction: the chat, the lineage edges (each source dataset -> the answer, expiring with the chat), the
audit event (who, model, sources; never message text) with its chain head, the usage counters (when they
live in the chat's region; otherwise one more write) and the request's idempotency record. Stored
answers are read through ``chat/redaction`` (sources the reader can no longer read are redacted).
"""
from __future__ import annotations

import inspect
import itertools
import json
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.chat import answer_output, modes, redaction, usage
from chalicelib.chat.models import ChatAttrs, chats
from chalicelib.core import audit, clock, correlation
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.authz import Principal, require
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import idempotency
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import CHAT_AUTO_EXPIRY, auto_expiry_seconds
from chalicelib.gateway.catalog import lineage
from chalicelib.knowledge import entailment_model
from chalicelib.llm import presets
from chalicelib.llm import service as models
from chalicelib.llm.prompt import Completion, Passage, Prompt, estimate_tokens, prompt_tokens
from chalicelib.llm.providers.openai_http import ProviderError

if TYPE_CHECKING:
    from chalicelib.knowledge.service import Hit

ROLES = ("system", "user", "assistant")
MAX_MESSAGES = 50
MAX_CONTENT_CHARS = 32_000
MAX_MODEL_CHARS = 200
MAX_CHAT_BYTES = 300_000  # one DynamoDB item holds a chat (400 KB limit)
RETRIEVE_K = 5
MAX_ANSWER_TOKENS = 1024
BODY_FIELDS = {"model", "messages", "stream", "mode", "preset_id"}  # mode, preset_id: a new chat only
LIST_KIND = "chats"
NOT_IN_SOURCES = "Nothing in the sources you may read answers this question."
log = get_logger("chat")


@dataclass
class Timings:
    retrieval_ms: float = 0.0
    model_ms: float = 0.0
    grounding_ms: float = 0.0
    storage_ms: float = 0.0


@dataclass
class Answer:
    reply: dict[str, Any]
    deltas: list[str] = field(default_factory=list)  # streamed content pieces (stream: true)
    timings: Timings = field(default_factory=Timings)


def check_body(body: Any) -> tuple[str, list[dict[str, str]], bool]:
    """``(model, messages, stream)`` or a 400 naming every bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "The request body must be a JSON object.")
    errors: list[dict[str, str]] = [{"field": str(k)[:64], "message": "is not a known field"}
                                    for k in body if k not in BODY_FIELDS]
    model = body.get("model")
    if not isinstance(model, str) or not 1 <= len(model) <= MAX_MODEL_CHARS:
        errors.append({"field": "model", "message": "is required: a model id from GET /v1/models, or 'auto'"})
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        errors.append({"field": "stream", "message": "must be a boolean"})
    messages = body.get("messages")
    out: list[dict[str, str]] = []
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        errors.append({"field": "messages", "message": f"must be a list of 1 to {MAX_MESSAGES} messages"})
    else:
        for i, m in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(m, dict) or set(m) - {"role", "content"}:
                errors.append({"field": where, "message": "must be an object with only role and content"})
                continue
            if m.get("role") not in ROLES:
                errors.append({"field": f"{where}.role", "message": "must be one of system, user, assistant"})
            content = m.get("content")
            if not isinstance(content, str):
                errors.append({"field": f"{where}.content", "message": "must be a string"})
            elif not content.strip() or len(content) > MAX_CONTENT_CHARS:
                errors.append({"field": f"{where}.content",
                               "message": f"must have 1 to {MAX_CONTENT_CHARS} characters"})
            else:
                out.append({"role": m.get("role"), "content": content})  # a missing role is reported above
        if not errors and out[-1]["role"] != "user":
            errors.append({"field": "messages", "message": "the last message must be the user's"})
    if errors:
        raise validation_error(errors)
    return model, out, stream


def _own(scope: RequestScope, chat_id: str) -> ChatAttrs:
    """The caller's chat (404 for a malformed id, another user's or workspace's chat, or an expired one)."""
    if not is_id(chat_id, "chat"):
        raise not_found("chat")
    principal = scope.principal
    cls = chats(scope.home)
    try:
        item = cls.get(principal.workspace_id, chat_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("chat") from None
    if item.user_id != principal.user_id or (item.expires_at is not None and item.expires_at <= clock.now()):
        raise not_found("chat")
    return item


def _notes(kind: str, checked: Any) -> dict[str, Any]:
    """What the reader must know beside the answer: no generative model, or low grounding."""
    out: dict[str, Any] = {}
    if kind == "extractive" and checked.notice == "not_in_sources":
        out["notice"] = {"code": "not_in_sources", "message": NOT_IN_SOURCES + " " + models.NO_GENERATIVE_MODEL}
    elif kind == "extractive":
        out["notice"] = {"code": "no_generative_model", "message": _off_the_point(checked) + models.NO_GENERATIVE_MODEL}
    elif checked.notice:
        out["notice"] = {"code": checked.notice, "message": checked.content.split("\n", 1)[0]}
    elif checked.grounding.get("answers_question") is False:
        out["notice"] = {"code": "may_not_answer", "message": _off_the_point(checked).strip()}
    if checked.unverified is not None:
        out["unverified_answer"] = checked.unverified
    return out


def _off_the_point(checked: Any) -> str:
    """What a reader must know when the supported quotes miss some of the question's key terms."""
    missing = checked.grounding.get("question_terms_not_quoted")
    return (f"The quoted sources do not mention {', '.join(missing)}: they may not answer your question. "
            if missing else "")


def _sources(hits: list[Hit], cited: list[dict[str, Any]]) -> list[dict[str, Any]]:
    used = {c["chunk_id"] for c in cited}
    return [{"kind": h.chunk.kind, "dataset_id": h.chunk.dataset_id, "id": h.citation()["source"]["id"],
             "chunk_id": h.chunk.id, "cited": h.chunk.id in used} for h in hits]


def _provider_failure(err: ProviderError) -> ApiError:
    if err.code == "timeout":
        return ApiError(504, "model_timeout", f"The model did not answer in time: {err}. Nothing was stored; "
                        "ask again, or ask an Admin to raise its timeout or pick a faster model.")
    return ApiError(502, "provider_error", f"The model provider failed: {err}", extra={"failure": err.code})


def answer_in_progress() -> ApiError:
    return ApiError(409, "answer_in_progress", "An answer to this chat is still being written: wait for it, or "
                    "stop it (POST /v1/chats/{chat_id}/answers/{message_id}/stop), then send the message again.")


def start(scope: RequestScope, body: Any, caller: CallerLike | None = None, chat_id: str | None = None,
          on_fail: Callable[[], None] | None = None, *, asked: str | None = None,
          created_at: str | None = None) -> Live:
    """Everything before the model writes: validate, retrieve, route. Every refusal is raised here,
    before a byte of the answer is sent; ``on_fail`` undoes the caller's preparation when a later step
    fails (an edited chat is restored). ``asked`` is the id of an answer whose question is already
    stored at the end of the chat (``chat/answers.py``): the answer takes that id and adds only itself."""
    # retrieval (numpy, bm25s) loads on the first answer, not at the platform group's cold start
    from chalicelib.knowledge import service as knowledge  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    principal = scope.principal
    require(principal, "chat.use")
    model_id, new_messages, stream = check_body(body)
    timings = Timings()
    existing = _own(scope, chat_id) if chat_id else None
    if existing is not None and existing.answering and existing.answering != asked:
        raise answer_in_progress()
    stored = json.loads(existing.messages) if existing else []
    if asked:
        stored = stored[:-len(new_messages)]  # the recorded question is the new message, not history
    history = [{"role": m["role"], "content": m["content"]}  # as the caller may read it now (chat/redaction.py)
               for m in redaction.redact_all(scope, stored)]
    mode, instructions, preset_id = _chat_options(scope, body, existing, asked)
    general = modes.general_allowed(scope, mode)
    history = ([{"role": "system", "content": instructions}] if instructions else []) \
        + ([{"role": "system", "content": modes.GENERAL_RULE}] if general else []) + history
    question = new_messages[-1]["content"]

    started = time.perf_counter()
    hits = knowledge.search(scope, question[:knowledge.MAX_QUERY_CHARS], RETRIEVE_K) \
        if principal.can("knowledge.read") else []
    timings.retrieval_ms = (time.perf_counter() - started) * 1000
    prompt = Prompt(history + new_messages, [Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(hits)],
                    max_tokens=MAX_ANSWER_TOKENS)
    need = models.Need(context_tokens=prompt_tokens(prompt) + MAX_ANSWER_TOKENS, streaming=stream)
    routing = models.route(scope, model_id, need)
    prompt.max_tokens = min(MAX_ANSWER_TOKENS, routing.chosen.max_answer_tokens)
    live = Live(scope, caller, existing, new_messages, question, hits, prompt, routing, stream, timings,
                on_fail, chat_id=existing.id if existing is not None else new_id("chat"), asked=bool(asked),
                mode=mode, instructions=instructions, preset_id=preset_id, general_allowed=general)
    if asked:
        live.message_id = asked
        live.created_at = created_at or live.created_at
    return live


def _chat_options(scope: RequestScope, body: dict[str, Any], existing: ChatAttrs | None,
                  asked: str | None) -> tuple[str, str | None, str | None]:
    """``(mode, system instructions, preset id)`` of the chat: chosen when it is created (``mode``,
    ``preset_id``), stored with it after (``PATCH /v1/chats/{id}`` changes the mode)."""
    if existing is not None:
        if not asked and ("mode" in body or "preset_id" in body):
            raise validation_error([{"field": k, "message": "is chosen when the chat is created (PATCH the chat "
                                     "to change its mode)"} for k in ("mode", "preset_id") if k in body])
        return existing.mode or modes.KNOWLEDGE, existing.instructions, existing.preset_id
    mode = modes.check(scope, body.get("mode"))
    if "preset_id" in body:
        preset_id, instructions = presets.instructions_of(scope, body["preset_id"])
        return mode, instructions, preset_id
    return mode, None, None


def stream_sse(begin: Callable[[], Live], held: idempotency.Hold,
               ref_of: Callable[[Any], dict[str, Any]]) -> tuple[Iterator[str], Callable[[], None]]:
    """An answer streamed while the model writes: its SSE chunks, and what ends it (called by whoever
    sends the chunks, when they end or the reader goes away: the answer stops and keeps its partial
    text; the ``Idempotency-Key`` claim is given back unless the answer was stored). Refusals and a
    model that cannot answer at all are raised here, before anything is sent."""
    try:
        live = begin()
        live.open_stream()
    except BaseException:
        held.release()
        raise
    live.committing = lambda: held.committing(ref_of)

    def ended() -> None:
        try:
            live.close()
        finally:
            held.release()  # a no-op once the answer committed

    return (encode_sse([e]) for e in live.events()), ended


def answer(scope: RequestScope, body: Any, caller: CallerLike | None = None, chat_id: str | None = None) -> Answer:
    """Answer one chat request (a new chat, or a continuation when ``chat_id`` is given), whole."""
    return start(scope, body, caller, chat_id).finish()


@dataclass
class Live:
    """One answer between routing and storing. ``finish`` generates and stores it whole; ``events``
    yields its server-sent events while the model writes (``content_delta`` carries the model's text as
    it arrives, links checked; the ``citations`` event carries the verified ``content`` that replaces it). When the
    reader goes away (the ``events`` generator is closed), the model stream is closed, so the model stops
    generating, and the partial answer is stored marked ``stopped``, billed for what was generated."""
    scope: RequestScope
    caller: CallerLike | None
    existing: ChatAttrs | None
    new_messages: list[dict[str, str]]
    question: str
    hits: list[Hit]
    prompt: Prompt
    routing: Any
    stream: bool
    timings: Timings
    on_fail: Callable[[], None] | None
    chat_id: str
    message_id: str = field(default_factory=lambda: new_id("msg"))
    created_at: str = field(default_factory=clock.iso)
    committing: Callable[[], ContextManager[list[Any]]] | None = None  # around the store (Idempotency-Key)
    correlation_id: str = field(default_factory=correlation.current)  # the request's, for a late error event
    asked: bool = False  # the question is already stored in the chat (``start``)
    mode: str = modes.KNOWLEDGE  # of a new chat; stored with it (chat/modes.py)
    instructions: str | None = None  # a new chat's system instructions (from its preset)
    preset_id: str | None = None
    general_allowed: bool = False  # this answer may be general (chat/modes.py)
    stopped_reply: dict[str, Any] | None = None  # the reply stored when the answer was stopped
    reply: dict[str, Any] | None = None  # the reply once stored
    alongside: Callable[[Tx, dict[str, Any]], None] | None = None  # more items for the answer's transaction
    _opened: tuple[Iterator[str | Completion], str | Completion, float] | None = None
    _events: Generator[dict[str, Any], None, None] | None = None

    @property
    def principal(self) -> Principal:
        return self.scope.principal

    def _failed(self) -> None:
        if self.on_fail is not None:
            self.on_fail()

    def finish(self) -> Answer:
        started = time.perf_counter()
        deltas: list[str] = []
        try:
            try:
                if self.stream:
                    completion: Completion | None = None
                    for part in models.stream(self.routing, self.prompt):
                        if isinstance(part, Completion):
                            completion = part
                        else:
                            deltas.append(part)
                    assert completion is not None
                else:
                    completion = models.complete(self.routing, self.prompt)
            except ProviderError as err:
                raise _provider_failure(err) from None
            self.timings.model_ms = (time.perf_counter() - started) * 1000
            reply = self._store(completion)
        except Exception:
            self._failed()
            raise
        return Answer(reply, deltas, self.timings)

    def open_stream(self) -> None:
        """Ask the model and wait for its first piece: a model that cannot answer at all (unreachable,
        refused, past its timeout) is the request's own error status (502, 504), not a stream event."""
        started = time.perf_counter()
        parts = models.stream(self.routing, self.prompt)
        try:
            first = next(parts)
        except ProviderError as err:
            self._failed()
            raise _provider_failure(err) from None
        except Exception:
            self._failed()
            raise
        self._opened = (parts, first, started)

    def close(self) -> None:
        """End the answer: a started event stream is closed (a partial answer is stored, marked
        stopped); a model stream opened but never read is closed (the model stops; nothing was shown)."""
        if self._events is not None and inspect.getgeneratorstate(self._events) != inspect.GEN_CREATED:
            self._events.close()
        elif self._opened is not None:
            getattr(self._opened[0], "close", lambda: None)()
            self._failed()

    def events(self) -> Generator[dict[str, Any], None, None]:
        self._events = self._event_stream()
        return self._events

    def _event_stream(self) -> Generator[dict[str, Any], None, None]:
        """``message_start``, ``content_delta``... as the model writes, ``citations``, ``message_stop``
        (or one ``error`` event: the problem, nothing stored); each with ``sequence``."""
        sequence = 0

        def event(name: str, data: dict[str, Any]) -> dict[str, Any]:
            nonlocal sequence
            sequence += 1
            return {"event": name, "data": {"sequence": sequence, **data}}

        if self._opened is None:
            self.open_stream()
        assert self._opened is not None
        parts, first, started = self._opened
        yield event("message_start", self._head())
        deltas: list[str] = []
        shown = answer_output.guard(self.scope, self.hits)  # no delta carries an unchecked URL
        try:
            completion: Completion | None = None
            for part in itertools.chain([first], parts):
                if isinstance(part, Completion):
                    completion = part
                else:
                    deltas.append(part)
                    if text := shown.feed(part):
                        yield event("content_delta", {"text": text})
            if text := shown.end():
                yield event("content_delta", {"text": text})
            assert completion is not None
            self.timings.model_ms = (time.perf_counter() - started) * 1000
            reply = self._store(completion)
        except GeneratorExit:  # the reader went away: stop the model, keep what it wrote
            getattr(parts, "close", lambda: None)()
            self._store_stopped("".join(deltas))
            raise
        except ProviderError as err:
            self._failed()
            yield event("error", _provider_failure(err).to_problem(self.correlation_id))
            return
        except ApiError as err:
            self._failed()
            yield event("error", err.to_problem(self.correlation_id))
            return
        except Exception:  # headers are sent: the failure is the stream's last event, never internals
            log.exception("answer failed while streaming", extra={"chat_id": self.chat_id})
            self._failed()
            yield event("error", ApiError(500, "internal_error", "An internal error occurred.")
                        .to_problem(self.correlation_id))
            return
        yield event("citations", {"content": reply["message"]["content"], "citations": reply["citations"],
                                  "grounding": reply["grounding"],
                                  **{k: reply[k] for k in ("notice", "unverified_answer", "origin") if k in reply}})
        yield event("message_stop", {"usage": reply["usage"], "stop_reason": "end_turn"})

    def _head(self) -> dict[str, Any]:
        spec = self.routing.chosen
        return {"id": self.message_id, "chat_id": self.chat_id, "model": spec.id, "provider": spec.provider,
                "region": self.routing.region, "routing": self.routing.as_dict(), "kind": spec.kind,
                "created_at": self.created_at}

    def _store_stopped(self, text: str) -> None:
        """The partial answer of a stopped stream, billed for the tokens generated (an estimate: the
        provider's own count comes only with a finished answer). A failure here is logged: the reader
        is gone."""
        completion = Completion(text, prompt_tokens(self.prompt), estimate_tokens(text))
        try:
            self.stopped_reply = self._store(completion, stopped=True)
        except Exception:  # noqa: BLE001 - nobody is left to answer; keep the service alive
            log.warning("stopped answer not stored", extra={"chat_id": self.chat_id}, exc_info=True)
            self._failed()

    def _as_general(self, checked: Any, kind: str, stopped: bool) -> bool:
        """Where the chat allows general answers and the sources do not answer: ``checked`` becomes the model's
        own text, labelled general, without citations (True)."""
        if not (self.general_allowed and kind == "generative" and not stopped
                and modes.unanswered(checked.grounding, checked.notice)):
            return False
        checked.content = checked.unverified if checked.unverified is not None else checked.content
        checked.unverified, checked.citations, checked.notice = None, [], None
        checked.grounding = modes.general_grounding(checked.grounding)
        return True

    def _store(self, completion: Completion, *, stopped: bool = False) -> dict[str, Any]:
        """Verify the answer's citations and store it (one transaction, module docstring)."""
        principal, routing, hits, existing = self.principal, self.routing, self.hits, self.existing
        started = time.perf_counter()
        spec = routing.chosen
        checker = entailment_model.for_answer(self.scope, routing) if not stopped else None
        # a stopped answer stays as far as it was written (its person watched it and stopped it): its sentences
        # are labelled, and it is never replaced by the note of an unsupported answer
        checked = answer_output.ground(completion.text, hits, self.scope, routing.region,
                                       generative=spec.kind == "generative" and not stopped, question=self.question,
                                       checker=checker)
        self.timings.grounding_ms = (time.perf_counter() - started) * 1000
        general = self._as_general(checked, spec.kind, stopped)
        notes = _notes(spec.kind, checked)
        if general:
            notes.update({"origin": modes.GENERAL, "notice": {"code": "general_answer",
                                                              "message": modes.GENERAL_NOTICE}})
        now, message_id, chat_id = self.created_at, self.message_id, self.chat_id
        ended = {"stopped": True} if stopped else {}
        assistant = {"id": message_id, "role": "assistant", "content": checked.content, "created_at": now,
                     "model": spec.id, "provider": spec.provider, "region": routing.region,
                     "routing": routing.as_dict(), "usage": {"input_tokens": completion.input_tokens,
                                                             "output_tokens": completion.output_tokens},
                     "citations": checked.citations, "grounding": checked.grounding,
                     "kind": spec.kind, **notes, **ended, "passages": answer_output.passages(hits)}
        stored_new = [] if self.asked else [{"id": new_id("msg"), **m, "created_at": now} for m in self.new_messages]

        started = time.perf_counter()
        region = routing.region
        ttl = auto_expiry_seconds(self.scope, CHAT_AUTO_EXPIRY)
        expires = int(clock.now()) + ttl if ttl else None
        cls = chats(region)
        if existing is None:
            title = self.question.strip().splitlines()[0][:80]
            messages = stored_new + [assistant]
            item = cls(principal.workspace_id, chat_id, user_id=principal.user_id, title=title, created_at=now,
                       **chat_options(self))
        else:
            item = existing
            messages = json.loads(existing.messages) + stored_new + [assistant]
        raw = json.dumps(messages, separators=(",", ":"))
        if len(raw.encode()) > MAX_CHAT_BYTES:
            raise ApiError(413, "chat_too_long", "This chat is too long to continue; start a new chat.")
        prior = existing.updated_at if existing is not None else None  # the version this answer continues
        item.messages, item.message_count, item.expires_at = raw, len(messages), expires
        if self.asked:
            item.answering = None
        item.updated_at = clock.iso()
        datasets = sorted({c["source"]["dataset_id"] for c in checked.citations} | {h.chunk.dataset_id for h in hits})
        checked_tokens = (checker.input_tokens, checker.output_tokens) if checker is not None else (0, 0)
        other = checker if checker is not None and checker.calls > 0 and checker.model != spec.id else None
        same = (0, 0) if other else checked_tokens
        counted = False

        def effects(tx: Tx) -> None:
            # the chat, its lineage (kept as long as the chat), the usage counter and the idempotency record
            nonlocal counted
            tx.save(item, condition=cls.id.does_not_exist() if prior is None else cls.updated_at == prior)
            for edge in lineage.edge_items(region, principal.workspace_id, [
                    ("DATASET", ds, "CHAT_ANSWER", message_id, {"target_name": f"chat answer {message_id}",
                                                                "chat_id": chat_id, "model": spec.id,
                                                                "user_id": principal.user_id})
                    for ds in datasets], expires_at=expires):
                tx.save(edge)
            counted = usage.add_in(tx, principal.workspace_id, spec.id, completion.input_tokens + same[0],
                                   completion.output_tokens + same[1])
            if other:  # the grounding check's tokens, under the model that checked (one item once per transaction)
                usage.add_in(tx, principal.workspace_id, other.model, other.input_tokens, other.output_tokens)
            idempotency.complete_in(tx, {"type": "chat_message", "chat_id": chat_id, "id": message_id})
            if self.alongside is not None and not stopped:
                self.alongside(tx, reply)

        reply = {"id": message_id, "chat_id": chat_id, "message": {"role": "assistant", "content": checked.content},
                 "model": spec.id, "provider": spec.provider, "region": region, "routing": routing.as_dict(),
                 "usage": assistant["usage"], "citations": checked.citations, "grounding": checked.grounding,
                 "kind": spec.kind, "created_at": now, **notes, **ended}
        with (self.committing() if self.committing is not None else nullcontext([])) as made:
            try:
                audit.append(region, principal.workspace_id, "chat.answered",
                             actor=Actor.of(principal),
                             target={"type": "chat", "id": chat_id},
                             details={"message_id": message_id, "model": spec.id, "provider": spec.provider,
                                      "region": region, "routing_reason": routing.reason,
                                      "sources": _sources(hits, checked.citations),
                                      "citations_dropped": len(checked.dropped), "usage": assistant["usage"],
                                      "grounding": checked.grounding["ratio"], **ended,
                                      **({"origin": modes.GENERAL} if general else {})},
                             caller=self.caller, effects=effects)
            except Refused as refused:
                if refused.tags != {"effect"}:
                    raise
                raise ApiError(409, "chat_changed", "The chat changed while this answer was written; send the "
                               "message again.") from None
            made.append(reply)
        if not counted:  # the counters live in another region than the chat: one more write
            usage.add(principal.workspace_id, spec.id, completion.input_tokens + same[0],
                      completion.output_tokens + same[1])
            if other:
                usage.add(principal.workspace_id, other.model, other.input_tokens, other.output_tokens)
        self.timings.storage_ms = (time.perf_counter() - started) * 1000
        self.reply = reply
        return reply


def replay(scope: RequestScope, ref: dict[str, Any]) -> dict[str, Any]:
    """The reply of an earlier answer, re-read from the stored chat (an ``Idempotency-Key`` replay)."""
    item = _own(scope, ref["chat_id"])
    for m in json.loads(item.messages):
        if m.get("id") == ref["id"] and m.get("role") == "assistant":
            m = redaction.redact(scope, m)
            return {"id": m["id"], "chat_id": item.id, "message": {"role": "assistant", "content": m["content"]},
                    **{k: m.get(k) for k in ("model", "provider", "region", "routing", "usage", "citations",
                                             "grounding", "kind", "created_at")},
                    **({"stopped": True} if m.get("stopped") else {}),
                    **({"redacted": m["redacted"]} if m.get("redacted") else {}),
                    **{k: m[k] for k in ("notice", "unverified_answer", "origin") if k in m},
                    **({"notice": m.get("notice") or {"code": "no_generative_model",
                                                       "message": models.NO_GENERATIVE_MODEL}}
                       if m.get("kind") == "extractive" else {})}
    raise not_found("chat message")


def sse_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of a stored answer (an ``Idempotency-Key`` replay): message_start,
    content_delta..., citations, message_stop; each carries ``sequence`` (1, 2, ...). Deltas are the
    verified answer in line-sized pieces; ``Live.events`` sends the same events while the model writes."""
    content = reply["message"]["content"]
    pieces = [p for p in content.splitlines(keepends=True) if p] or [""]
    events: list[dict[str, Any]] = [{"event": "message_start", "data": {
        k: reply[k] for k in ("id", "chat_id", "model", "provider", "region", "routing", "kind", "created_at")}}]
    events += [{"event": "content_delta", "data": {"text": p}} for p in pieces]
    events.append({"event": "citations", "data": {"content": content, "citations": reply["citations"],
                                                  "grounding": reply["grounding"],
                                                  **{k: reply[k] for k in ("notice", "unverified_answer", "origin")
                                                     if k in reply}}})
    events.append({"event": "message_stop", "data": {"usage": reply["usage"],
                                                     "stop_reason": "stopped" if reply.get("stopped") else "end_turn"}})
    for n, e in enumerate(events, start=1):
        e["data"] = {"sequence": n, **e["data"]}
    return events


def encode_sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"id: {e['data']['sequence']}\nevent: {e['event']}\ndata: "
                   f"{json.dumps(e['data'], separators=(',', ':'))}\n\n" for e in events)


def iter_sse(reply: dict[str, Any]) -> Iterator[str]:
    for e in sse_events(reply):
        yield encode_sse([e])


# --- reading, listing, deleting ----------------------------------------------------------------------

def _summary(item: ChatAttrs) -> dict[str, Any]:
    return {"id": item.id, "title": item.title, "message_count": int(item.message_count or 0),
            "created_at": item.created_at, "updated_at": item.updated_at,
            "expires_at": clock.iso(item.expires_at) if item.expires_at else None,
            "mode": item.mode or modes.KNOWLEDGE, "preset_id": item.preset_id}


def chat_options(live: Live) -> dict[str, Any]:
    """What a new chat keeps of the choices it was created with (``_chat_options``)."""
    return {"mode": live.mode if live.mode != modes.KNOWLEDGE else None, "instructions": live.instructions,
            "preset_id": live.preset_id}


def get_chat(scope: RequestScope, chat_id: str) -> dict[str, Any]:
    principal = scope.principal
    require(principal, "chat.use")
    item = _own(scope, chat_id)
    answering = {"answering": {"id": item.answering, "events": f"/v1/chats/{chat_id}/answers/{item.answering}/events"}
                 } if item.answering else {}
    return {**_summary(item), "messages": redaction.redact_all(scope, json.loads(item.messages)), **answering}


def list_chats(scope: RequestScope, query: dict[str, str]) -> dict[str, Any]:
    """The caller's chats, newest first, paged (``limit``, ``after``)."""
    principal = scope.principal
    require(principal, "chat.use")
    paging.check_params(query, ("limit", "after"))
    lim = paging.limit(query)
    after = paging.decode(LIST_KIND, query.get("after"))
    cls = chats(scope.home)
    cond = cls.id < after if after else cls.id.startswith("chat_")
    now = clock.now()
    items: list[ChatAttrs] = []
    for item in cls.query(principal.workspace_id, cond, scan_index_forward=False,
                          filter_condition=cls.user_id == principal.user_id, page_size=100):
        if item.expires_at is not None and item.expires_at <= now:
            continue
        items.append(item)
        if len(items) > lim:
            break
    page = paging.page(items, lim, LIST_KIND, lambda i: i.id)
    return {"items": [_summary(i) for i in page["_items"]], "has_more": page["has_more"],
            "next_cursor": page["next_cursor"]}


def delete_chat(scope: RequestScope, chat_id: str, caller: CallerLike | None = None) -> None:
    principal = scope.principal
    require(principal, "chat.use")
    item = _own(scope, chat_id)
    region = scope.home
    audit.append(region, principal.workspace_id, "chat.deleted", actor=Actor.of(principal),
                 target={"type": "chat", "id": chat_id}, caller=caller, effects=lambda tx: tx.delete(item))
    forget_lineage(principal.workspace_id, item)


def forget_lineage(workspace_id: str, item: ChatAttrs) -> None:
    """Lineage of a chat lives as long as the chat: its answers' edges go with it."""
    for m in json.loads(item.messages or "[]"):
        if m.get("role") == "assistant" and m.get("id"):
            lineage.remove_target(type(item).Meta.region, workspace_id, m["id"])
