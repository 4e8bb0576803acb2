"""What to check when an endpoint's breaker stops it: one hint per systematic cause.

:func:`stop_line` is the breaker's one line, ended with the hint. A hint names the setting to
check (``base_url`` and its environment variable, the key's variable), never a value.
"""

from __future__ import annotations

from ci_evals._util.netcause import SCHEME_HINT
from ci_evals._util.redact import MESSAGE_LIMIT, scrub_and_shorten
from ci_evals.llm.errors import shown_url
from ci_evals.llm.failures import Failure

KEY_VARS = {"anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY"}
URL_VARS = {"anthropic": "ANTHROPIC_BASE_URL", "google": "GOOGLE_GEMINI_BASE_URL"}
REDIRECT_HINT = "LLM calls follow no redirect: point base_url at the final address"


def stop_hint(failure: Failure, provider: str, api_key_env: str | None) -> str:
    """What to check for ``failure`` (a cause the breaker counts) on ``provider``'s endpoint."""
    kind = failure.kind or ""
    if kind.startswith("http_3"):  # a redirect is never followed (failures.NO_REDIRECTS)
        return REDIRECT_HINT
    key_var = api_key_env or KEY_VARS.get(provider, "OPENAI_API_KEY")
    url_var = URL_VARS.get(provider, "OPENAI_BASE_URL")
    return {
        "dns": f"check the host name in base_url (or {url_var})",
        "refused": f"is the server running? check the host and port in base_url (or {url_var})",
        "tls": (
            f"check the scheme of base_url (or {url_var})"
            if SCHEME_HINT in failure.problem
            else "check the scheme (http/https) and the server's certificate (SSL_CERT_FILE)"
        ),
        "http_401": f"check the API key in {key_var}",
        "http_403": f"check that the key in {key_var} may use this model and endpoint",
        "http_404": "check the model name and that base_url ends where the API starts (…/v1)",
        "http_400": "the server rejects every request: check the model and its parameters",
        "quota": "the account's quota is used up: check its plan and billing",
    }.get(kind, "check the endpoint")


def stop_line(
    failure: Failure, provider: str, api_key_env: str | None, base_url: str, key: str | None
) -> str:
    """The breaker's one line: the cause, the host (never the key) and what to check."""
    hint = stop_hint(failure, provider, api_key_env)
    problem = scrub_and_shorten(failure.problem, MESSAGE_LIMIT, [key])  # a server may echo the key
    return f"stopped calling {shown_url(base_url)} after its first calls all failed: {problem} ({hint})"
