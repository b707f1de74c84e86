"""What every SCIM endpoint shares: the media type, SCIM errors (RFC 7644 section 3.12), ETags, list
paging (``startIndex``/``count``), filters (parsed and evaluated by ``scim2-models``) and addresses."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from chalice import Response
from pydantic import ValidationError
from scim2_models import Error, SCIMException, ScimFilter
from scim2_models.path.expressions import Comparison

from chalicelib.core import correlation
from chalicelib.core.http.errors import ApiError
from chalicelib.core.regions import endpoints
from chalicelib.core.tenancy import RequestScope

SCIM_JSON = "application/scim+json"
CONTENT_TYPES = [SCIM_JSON, "application/json"]
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
DEFAULT_COUNT = 100
MAX_COUNT = 200
MAX_FILTER = 1000
# platform codes -> the scimType a SCIM client understands (RFC 7644 table 9)
_SCIM_TYPES = {"validation_failed": "invalidValue", "invalid_body": "invalidSyntax", "group_name_taken": "uniqueness",
               "user_name_taken": "uniqueness", "already_provisioned": "uniqueness", "email_taken": "uniqueness"}


def error(status: int, scim_type: str | None, detail: str) -> ApiError:
    """A SCIM error: ``scim_type`` is RFC 7644's ``scimType`` (also the error's stable code)."""
    return ApiError(status, scim_type or ("scim_error" if status != 404 else "not_found"), detail,
                    extra={"scimType": scim_type} if scim_type else None)


def from_exception(exc: Exception) -> ApiError:
    """The SCIM error for a ``scim2-models`` exception or a payload that does not validate."""
    if isinstance(exc, SCIMException):
        return error(exc.status, exc.scim_type or None, str(exc.detail)[:500])
    if isinstance(exc, ValidationError):
        first = exc.errors()[0] if exc.errors() else {"type": "value_error", "loc": (), "msg": "invalid"}
        try:
            err = Error.from_validation_error(first)
            return error(int(err.status or 400), err.scim_type or "invalidValue", str(err.detail or first["msg"])[:500])
        except Exception:  # noqa: BLE001 - any shape it cannot map is a plain invalid value
            where = ".".join(str(p) for p in first.get("loc", ()))
            return error(400, "invalidValue", f"{where}: {first.get('msg', 'invalid')}"[:500])
    raise exc


def render_error(err: ApiError) -> Response:
    """An ``ApiError`` in SCIM's error shape (``schemas``, ``status`` as a string, ``scimType``, ``detail``)."""
    body: dict[str, Any] = {"schemas": [ERROR_SCHEMA], "status": str(err.status), "detail": err.detail}
    scim_type = err.extra.get("scimType") or _SCIM_TYPES.get(err.code)
    if scim_type:
        body["scimType"] = scim_type
    headers: dict[str, str | list[str]] = {"Content-Type": SCIM_JSON, "Cache-Control": "no-store",
                                           correlation.HEADER: correlation.current(), **err.headers}
    return Response(body=json.dumps(body), status_code=err.status, headers=headers)


def respond(body: Any, status: int = 200, etag: str | None = None, location: str | None = None) -> Response:
    headers: dict[str, str | list[str]] = {"Content-Type": SCIM_JSON, "Cache-Control": "no-store"}
    if etag:
        headers["ETag"] = etag
    if location:
        headers["Location"] = location
    return Response(body=json.dumps(body, separators=(",", ":")), status_code=status, headers=headers)


def etag(version: float) -> str:
    return f'W/"{int(version)}"'


def check_if_match(header: str | None, version: float) -> None:
    """412 unless an ``If-Match`` header (when sent) names the resource's current version (or ``*``)."""
    if header is None:
        return
    tags = {t.strip() for t in header.split(",")}
    current = etag(version)
    if "*" in tags or current in tags or current[2:] in tags:
        return
    raise error(412, None, "The resource changed since the version named in If-Match; read it again.")


@dataclass(frozen=True)
class Page:
    start: int  # 1-based startIndex
    count: int


def page_of(query: dict[str, str]) -> Page:
    """``startIndex`` (below 1 means 1) and ``count`` (negative means 0; at most ``MAX_COUNT``)."""
    return Page(max(1, _int(query, "startIndex", 1)), min(MAX_COUNT, max(0, _int(query, "count", DEFAULT_COUNT))))


def _int(query: dict[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"-?\d{1,9}", raw.strip()):
        raise error(400, "invalidValue", f"{name} must be an integer.")
    return int(raw)


def list_response(resources: list[dict[str, Any]], total: int, page: Page) -> dict[str, Any]:
    return {"schemas": [LIST_SCHEMA], "totalResults": total, "startIndex": page.start,
            "itemsPerPage": len(resources), "Resources": resources}


def parse_filter(model: type, text: str | None) -> Any:
    """The request's ``filter`` bound to ``model`` (None when absent); 400 ``invalidFilter`` when malformed."""
    if text is None or not text.strip():
        return None
    if len(text) > MAX_FILTER:
        raise error(400, "invalidFilter", f"A filter holds at most {MAX_FILTER} characters.")
    try:
        return ScimFilter[model](text)  # type: ignore[index,valid-type]
    except (SCIMException, ValueError) as exc:
        raise error(400, "invalidFilter", f"The filter is not valid: {str(exc)[:200]}") from None


def equality(flt: Any, *names: str) -> tuple[str, str] | None:
    """``(attribute, value)`` when the filter is one ``<name> eq "<value>"`` of ``names`` (case-insensitive
    attribute names, RFC 7643 section 2.1), else None: the cheap lookups providers use to match accounts."""
    node = flt.ast if flt is not None else None
    if not isinstance(node, Comparison) or node.op.value != "eq" or node.attr_path.sub_attr is not None:
        return None
    attr = node.attr_path.attr.lower()
    wanted = {n.lower(): n for n in names}
    if attr not in wanted or not isinstance(node.value, str):
        return None
    return wanted[attr], node.value


def excluded(query: dict[str, str], name: str) -> bool:
    """Whether ``excludedAttributes`` names ``name`` (Entra ID reads groups without their members)."""
    return name.lower() in {a.strip().lower() for a in (query.get("excludedAttributes") or "").split(",")}


def base_url(scope: RequestScope) -> str:
    """The workspace's SCIM base URL, at the deployment of its region."""
    api = endpoints(scope.entry().region)["api_base_url"]
    return api[: -len("/v1")] + f"/scim/v2/{scope.workspace_id}"


def without_foreign_schemas(payload: Any, known: tuple[str, ...]) -> Any:
    """``payload`` without the ``schemas`` URNs it holds no attributes of and that this service does not
    declare (Entra ID names its own ``.../ADSCIM/2.0/Group`` on every group it creates)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("schemas"), list):
        return payload
    kept = [s for s in payload["schemas"] if s in known or (isinstance(s, str) and s in payload)]
    return {**payload, "schemas": kept or list(known[:1])}


def _names(raw: str | None, core: str) -> list[str]:
    """Attribute names of ``attributes``/``excludedAttributes``, lower-cased, the core schema's URN prefix
    dropped (``urn:...:core:2.0:User:userName`` is ``username``)."""
    out = []
    for part in (raw or "").split(","):
        name = part.strip()
        if name.lower().startswith(core.lower() + ":"):
            name = name[len(core) + 1:]
        if name:
            out.append(name.lower())
    return out


def _split(name: str, data: dict[str, Any]) -> tuple[str | None, str | None]:
    """(top-level key of ``data``, sub-attribute) named by ``name``: ``name.givenName``, or an extension's
    ``urn:...:User:department`` (its URN is the top-level key)."""
    for key in data:
        k = key.lower()
        if name == k:
            return key, None
        if name.startswith(k + ":") or name.startswith(k + "."):
            return key, name[len(k) + 1:]
    return None, None


ALWAYS = ("schemas", "id")


def project(data: dict[str, Any], query: dict[str, str], core: str) -> dict[str, Any]:
    """A resource cut to ``attributes`` (plus what is always returned), or without ``excludedAttributes``
    (RFC 7644 section 3.4.2.5); names are case-insensitive."""
    wanted, dropped = _names(query.get("attributes"), core), _names(query.get("excludedAttributes"), core)
    if wanted:
        out: dict[str, Any] = {k: v for k, v in data.items() if k in ALWAYS}
        for name in wanted:
            key, sub = _split(name, data)
            if key is None:
                continue
            if sub is None or not isinstance(data[key], dict):
                out[key] = data[key]
            else:
                inner = {k: v for k, v in data[key].items() if k.lower() == sub}
                if inner:
                    out.setdefault(key, {}).update(inner)
        return out
    out = dict(data)
    for name in dropped:
        key, sub = _split(name, out)
        if key is None or key in ALWAYS:
            continue
        if sub is None:
            out.pop(key)
        elif isinstance(out[key], dict):
            out[key] = {k: v for k, v in out[key].items() if k.lower() != sub}
    return out
