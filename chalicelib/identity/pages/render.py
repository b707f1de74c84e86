"""Server-rendered HTML of the hosted sign-in pages (``string.Template``; every value is escaped).

Accessibility: one ``main`` landmark with a heading, labelled inputs, errors in elements linked by
``aria-describedby`` (and an ``role=alert`` live region), focus moved to the first field of each step.
Every input carries its standard ``autocomplete`` token. No inline script or style: the strict
Content-Security-Policy allows only our own static files.
"""
from __future__ import annotations

import html
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from chalicelib.core.config import settings
from chalicelib.identity.signin import password_policy as password_rule

if TYPE_CHECKING:  # the consent page's view (oauth/consent/decision.py); render only reads its fields
    from chalicelib.identity.oauth.consent.decision import ConsentView

STATIC_DIR = Path(__file__).parent / "static"
STATIC_FILES = {"signin.js": "text/javascript", "reset.js": "text/javascript", "account.js": "text/javascript",
                "webauthn.js": "text/javascript", "consent.js": "text/javascript", "signin.css": "text/css"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HTML_HEADERS = {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": CSP,
                "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                "X-Frame-Options": "DENY"}

LAYOUT = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · AI Platform</title>
<link rel="stylesheet" href="/static/signin.css">
</head>
<body>
<header><a href="/signin">AI Platform</a></header>
<main id="content" class="$main_class" aria-labelledby="page-title">
<h1 id="page-title">$title</h1>
$body
</main>
$scripts
</body>
</html>
""")

SIGNIN = Template("""$client<div id="signin" data-return-to="$return_to" data-conditional="$conditional">
<p id="error" class="error" role="alert" tabindex="-1" hidden></p>
<section id="step-email" aria-label="E-mail address">
  <form id="email-form" novalidate>
    <label for="email">E-mail address</label>
    <input id="email" name="email" type="email" autocomplete="username webauthn" required
           aria-describedby="email-error" autofocus>
    <p id="email-error" class="error" hidden></p>
    <button type="submit">Continue</button>
  </form>
  <p class="divider">or</p>
  <button id="passkey-button" type="button" class="secondary">Sign in with a passkey</button>
  <p class="note" id="signup-hint">New here? Enter your e-mail address and continue: you can create your account with a code we e-mail you.</p>
</section>
<section id="step-sso" aria-label="Single sign-on" hidden>
  <p>Your organisation signs in <strong class="who"></strong> with its identity provider.</p>
  <a id="sso-button" class="button sso" href="#">Continue with your identity provider</a>
  <button type="button" class="secondary" data-back>Use another e-mail address</button>
</section>
<section id="step-methods" aria-label="Sign-in methods" hidden>
  <p>Signing in as <strong class="who"></strong></p>
  <button id="method-passkey" type="button">Sign in with a passkey</button>
  <form id="password-form" novalidate>
    <label for="password">Password</label>
    <input id="password" name="password" type="password" autocomplete="current-password" required
           aria-describedby="password-error">
    <p id="password-error" class="error" hidden></p>
    <button type="submit" class="secondary">Sign in with password</button>
    <p class="note"><a href="/signin/reset">Forgot your password?</a></p>
  </form>
  <button id="method-code" type="button" class="secondary">E-mail me a sign-in code</button>
  <p class="note" id="signup-note">New here? &ldquo;E-mail me a sign-in code&rdquo; creates your account with this address.</p>
  <button type="button" class="secondary" data-back>Use another e-mail address</button>
</section>
<section id="step-code" aria-label="E-mailed code" hidden>
  <form id="code-form" novalidate>
    <p>We sent a code to <strong class="who"></strong>. It works once and expires soon.</p>
    <label for="code">Sign-in code</label>
    <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" required
           aria-describedby="code-error">
    <p id="code-error" class="error" hidden></p>
    <button type="submit">Sign in</button>
  </form>
</section>
<section id="step-mfa" aria-label="Second factor" hidden>
  <form id="mfa-form" novalidate>
    <label for="mfa-code">Code from your authenticator app, or a recovery code</label>
    <input id="mfa-code" name="code" type="text" autocomplete="one-time-code" required
           aria-describedby="mfa-code-error">
    <p id="mfa-code-error" class="error" hidden></p>
    <button type="submit">Verify</button>
  </form>
  <button id="mfa-key" type="button" class="secondary">Use a security key</button>
</section>
</div>""")

RESET = Template("""<p id="error" class="error" role="alert" hidden></p>
<p id="reset-done" class="note" role="status" hidden>If an account exists for this address, we sent a link
that resets its password. It works once, for 30 minutes.</p>
<form id="reset-form" data-mode="request" novalidate>
  <label for="email">E-mail address</label>
  <input id="email" name="email" type="email" autocomplete="email" required aria-describedby="email-error" autofocus>
  <p id="email-error" class="error" hidden></p>
  <button type="submit">E-mail me a reset link</button>
</form>""")

RESET_CONFIRM = Template("""<p id="error" class="error" role="alert" hidden></p>
<p id="reset-done" class="note" role="status" hidden>Your password was changed. <a href="/signin">Sign in</a>.</p>
<form id="reset-form" data-mode="confirm" data-token="$token" novalidate>
  <label for="new-password">New password</label>
  <input id="new-password" name="new_password" type="password" autocomplete="new-password" required
         minlength="$min_length" maxlength="$max_length" aria-describedby="new-password-hint new-password-error" autofocus>
  <p id="new-password-hint" class="note">$rule_text</p>
  <p id="new-password-error" class="error" hidden></p>
  <button type="submit">Set new password</button>
</form>""")

ACCOUNT = Template("""<p><a id="back-to-app" href="$app_url">&larr; Back to the workspace app</a></p>
<p>Signed in as <strong id="account-email">$email</strong>.</p>
<p id="status" class="note" role="status" aria-live="polite" hidden></p>
<section aria-labelledby="h-passkeys"><h2 id="h-passkeys">Passkeys</h2>
  <ul id="passkeys" class="items"></ul>
  <button id="add-passkey" type="button">Add a passkey</button></section>
<section aria-labelledby="h-keys"><h2 id="h-keys">Security keys (second factor)</h2>
  <ul id="security-keys" class="items"></ul>
  <button id="add-security-key" type="button" class="secondary">Add a security key</button></section>
<section aria-labelledby="h-totp"><h2 id="h-totp">Authenticator app</h2><p id="totp-state" class="note"></p>
  <button id="totp-start" type="button" class="secondary" hidden>Set up an authenticator app</button>
  <form id="totp-form" novalidate hidden>
    <p class="note">Scan this code with your authenticator app:</p>
    <div id="totp-qr" class="qr" role="img" aria-label="QR code of your authenticator app key"></div>
    <p class="note">On this device: <a id="totp-link" href="#">open it in your authenticator app</a>.
      Or type this key into the app: <code id="totp-secret"></code></p>
    <label for="totp-code">6-digit code from the app</label>
    <input id="totp-code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" required
           aria-describedby="totp-code-error">
    <p id="totp-code-error" class="error" hidden></p>
    <button type="submit">Turn on</button>
  </form></section>
<section aria-labelledby="h-recovery"><h2 id="h-recovery">Recovery codes</h2><p id="recovery-state" class="note"></p>
  <ul id="recovery-codes" class="items" aria-label="New recovery codes" hidden></ul>
  <form id="recovery-form" novalidate hidden>
    <label for="recovery-totp">Code from your authenticator app, to create new recovery codes</label>
    <input id="recovery-totp" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" required
           aria-describedby="recovery-totp-error">
    <p id="recovery-totp-error" class="error" hidden></p>
    <button type="submit" class="secondary">Create new recovery codes</button>
  </form></section>
<section aria-labelledby="h-password"><h2 id="h-password">Password</h2><p id="password-state" class="note"></p>
  <form id="password-form" novalidate>
    <label for="current-password">Current password (if you have one)</label>
    <input id="current-password" name="current_password" type="password" autocomplete="current-password"
           aria-describedby="current-password-error">
    <p id="current-password-error" class="error" hidden></p>
    <label for="new-password">New password</label>
    <input id="new-password" name="new_password" type="password" autocomplete="new-password" required
           minlength="$min_length" maxlength="$max_length" aria-describedby="new-password-hint new-password-error">
    <p id="new-password-hint" class="note">$rule_text</p>
    <p id="new-password-error" class="error" hidden></p>
    <button type="submit" class="secondary">Set password</button>
  </form></section>
<section aria-labelledby="h-apps"><h2 id="h-apps">Connected apps</h2>
  <p class="note">Applications you allowed to act for you. Revoking one ends its access at once.</p>
  <ul id="connected-apps" class="items"></ul></section>
<section aria-labelledby="h-sessions"><h2 id="h-sessions">Sessions</h2><ul id="sessions" class="items"></ul></section>
<section aria-labelledby="h-tokens"><h2 id="h-tokens">API tokens</h2><ul id="api-tokens" class="items"></ul>
  <form id="token-form" novalidate>
    <label for="token-name">Token name</label>
    <input id="token-name" name="name" type="text" autocomplete="off" required maxlength="100"
           aria-describedby="token-name-error">
    <p id="token-name-error" class="error" hidden></p>
    <label for="token-workspace">Workspace</label>
    <select id="token-workspace" name="workspace_id"></select>
    <label for="token-days">Expires after (days)</label>
    <input id="token-days" name="expires_in_days" type="number" min="1" value="30" autocomplete="off">
    <button type="submit" class="secondary">Create API token</button>
  </form>
  <p id="token-created" class="note" hidden>Copy the token now; it is not shown again:
    <input id="token-value" type="text" readonly aria-label="New API token" autocomplete="off"></p></section>
<button id="signout" type="button" class="secondary">Sign out</button>""")

CONSENT = Template("""<section id="consent" data-request="$key" aria-labelledby="page-title">
<p class="lead"><strong id="client-name">$name</strong> <span class="badge" id="name-origin">$name_origin</span>
wants to act for you.</p>
<dl class="facts">
  <dt>Sends you to</dt><dd id="redirect-host">$redirect_host</dd>
  <dt>Registration</dt><dd id="registered">$registered</dd>
  <dt>Workspace</dt><dd id="workspace">$workspace</dd>
  <dt>Your role there</dt><dd id="role">$role</dd>
</dl>
<h2 id="h-abilities">If you allow it, it can</h2>
<ul id="abilities" aria-labelledby="h-abilities">
$abilities
</ul>
<p class="note">Signed in as <strong>$email</strong>. Allow only applications you know and trust: a name on
this page proves nothing about who runs the application. You can revoke it later in your
<a href="/account">security settings</a>.</p>
<p id="error" class="error" role="alert" tabindex="-1" hidden></p>
<div class="actions">
  <button id="allow" type="button">Allow</button>
  <button id="deny" type="button" class="secondary">Deny</button>
</div>
</section>""")

SIGNIN_CLIENT = Template("""<p id="signin-client" class="note" role="note">The application <strong>$name</strong>
<span class="badge">$name_origin</span> asked for this sign-in. Afterwards you choose whether it may act for
you; then your browser goes to <strong id="signin-next-host">$redirect_host</strong>.</p>
""")

MFA_REQUIRED = Template("""<p id="mfa-reason" role="status">$reason</p>
<h2 id="h-next">What to do</h2>
<ol id="mfa-next" class="steps" aria-labelledby="h-next">
$steps
</ol>""")

MESSAGE = Template("""<p class="$css" role="$role">$message</p>
<p><a class="button" href="$link">$link_text</a></p>""")


def _rule() -> dict[str, str]:
    """What every form that sets a password shows and enforces (``signin/password_rule.py``)."""
    return {"min_length": str(password_rule.MIN_LENGTH), "max_length": str(password_rule.MAX_LENGTH),
            "rule_text": html.escape(password_rule.RULE_TEXT)}


def _scripts(*names: str) -> str:
    return "\n".join(f'<script src="/static/{n}" defer></script>' for n in names)


def render(title: str, body: str, scripts: tuple[str, ...] = (), wide: bool = False) -> str:
    return LAYOUT.substitute(title=html.escape(title), body=body, scripts=_scripts(*scripts),
                             main_class="wide" if wide else "")


def name_origin(self_declared: bool) -> str:
    return "name given by the application itself, not verified" if self_declared else "registered by an administrator"


def signin_page(return_to: str, conditional: bool = True, *, client: tuple[str, bool, str] | None = None) -> str:
    """``client``: (name, self-declared, redirect host) of the third-party client the sign-in continues to."""
    shown = "" if client is None else SIGNIN_CLIENT.substitute(
        name=html.escape(client[0]), name_origin=html.escape(name_origin(client[1])), redirect_host=html.escape(client[2]))
    body = SIGNIN.substitute(client=shown, return_to=html.escape(return_to, quote=True),
                             conditional="on" if conditional else "off")
    return render("Sign in", body, ("webauthn.js", "signin.js"))


def consent_page(view: ConsentView) -> str:
    """Allow or Deny a third-party client (``oauth/consent/decision.py``); every value escaped."""
    abilities = "\n".join(f"<li>{html.escape(a)}</li>" for a in view.abilities)
    body = CONSENT.substitute(key=html.escape(view.key, quote=True), name=html.escape(view.client_name),
                              name_origin=html.escape(name_origin(view.self_declared)),
                              redirect_host=html.escape(view.redirect_host), registered=html.escape(view.registration),
                              workspace=html.escape(view.workspace), role=html.escape(view.role or "none"),
                              abilities=abilities, email=html.escape(view.email))
    return render("Allow access?", body, ("consent.js",))


def reset_page(token: str | None) -> str:
    if token:
        return render("Choose a new password", RESET_CONFIRM.substitute(token=html.escape(token, quote=True),
                                                                         **_rule()),
                      ("webauthn.js", "reset.js"))
    return render("Reset your password", RESET.substitute(), ("webauthn.js", "reset.js"))


def account_page(email: str) -> str:
    app_url = html.escape(settings().app_url.rstrip("/") + "/", quote=True)
    return render("Security settings", ACCOUNT.substitute(email=html.escape(email), app_url=app_url, **_rule()),
                  ("webauthn.js", "account.js"),
                  wide=True)


def mfa_required_page(*, workspace_name: str | None, signed_in: bool, has_second_factor: bool,
                      has_passkey: bool, again: str) -> str:
    """Why a one-factor sign-in cannot open an MFA-enforced workspace, and how to go on."""
    where = f"The workspace \u201c{workspace_name}\u201d" if workspace_name else "This workspace"
    reason = (f"{where} requires multi-factor authentication. You signed in with an e-mailed code, which is one "
              "factor, so this sign-in cannot open it.")
    again_link = f'<a class="button" id="sign-in-again" href="{html.escape(again, quote=True)}">'
    steps = []
    if has_passkey:
        steps.append(f"<li>Sign in with your passkey: it counts as two factors. {again_link}Sign in with a passkey</a></li>")
    elif has_second_factor:
        steps.append(f"<li>Sign in again and answer the second step with your authenticator app, a recovery code "
                     f"or your security key. {again_link}Sign in again</a></li>")
    else:
        if signed_in:
            steps.append('<li>Set up a second factor in your security settings: an authenticator app, a security '
                         'key, or a passkey (a passkey alone counts as two factors). '
                         '<a class="button" id="open-settings" href="/account">Open security settings</a></li>')
        steps.append(f"<li>Then sign in again with it. {again_link}Sign in again</a></li>")
    steps.append("<li>If you cannot set up a second factor, ask an Admin of the workspace for help.</li>")
    return render("This workspace needs a second factor", MFA_REQUIRED.substitute(reason=html.escape(reason),
                                                                                  steps="\n".join(steps)))


def message_page(title: str, message: str, *, error: bool = True, link: str = "/signin",
                 link_text: str = "Back to sign-in") -> str:
    body = MESSAGE.substitute(css="error" if error else "note", role="alert" if error else "status",
                              message=html.escape(message), link=html.escape(link, quote=True),
                              link_text=html.escape(link_text))
    return render(title, body)


def static_file(name: str) -> tuple[str, str] | None:
    """(content, content type) of a known static file; None for anything else (no path traversal)."""
    if name not in STATIC_FILES:
        return None
    return (STATIC_DIR / name).read_text(encoding="utf-8"), STATIC_FILES[name]
