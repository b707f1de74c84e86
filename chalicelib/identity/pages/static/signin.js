// Hosted sign-in page: e-mail first, then SSO or the user's methods (passkey, password, e-mailed code).
'use strict';
(function () {
  const { requestOptions, assertionJSON, postJSON } = window.aiplat;
  const root = document.getElementById('signin');
  const returnTo = root.dataset.returnTo;
  const $ = (id) => document.getElementById(id);
  const state = { email: '', mfaToken: '' };
  let conditional = null;

  function showError(message, field) {
    const box = field ? $(field + '-error') : $('error');
    box.textContent = message || '';
    box.hidden = !message;
    if (message && field) $(field).setAttribute('aria-invalid', 'true');
    if (message && !field) box.focus();
  }
  function clearErrors() {
    document.querySelectorAll('.error').forEach((e) => { e.textContent = ''; e.hidden = true; });
    document.querySelectorAll('[aria-invalid]').forEach((e) => e.removeAttribute('aria-invalid'));
  }
  function show(stepId, focusId) {
    ['step-email', 'step-sso', 'step-methods', 'step-code', 'step-mfa'].forEach((id) => {
      const el = $(id);
      if (el) el.hidden = id !== stepId;
    });
    if (focusId && $(focusId)) $(focusId).focus();
  }
  function done(res) { window.location.assign((res && res.data && res.data.redirect_to) || returnTo || '/account'); }
  function secondStepOrDone(res) {
    if (!res.data.mfa_required) { done(res); return; }
    state.mfaToken = res.data.mfa_token;
    const methods = res.data.methods || [];
    $('mfa-key').hidden = !methods.some((m) => m === 'webauthn' || m === 'security_key');
    show('step-mfa', 'mfa-code');
  }
  function problem(res, fallback) { return (res.data && res.data.detail) || fallback; }

  async function passkeySignIn(mediation) {
    const opts = await postJSON('/signin/passkey/options');
    if (!opts.ok) { showError(problem(opts, 'Passkey sign-in is not available.')); return; }
    const request = { publicKey: requestOptions(opts.data.publicKey) };
    if (mediation) {
      conditional = new AbortController();
      request.mediation = 'conditional';
      request.signal = conditional.signal;
    }
    let cred;
    try {
      cred = await navigator.credentials.get(request);
    } catch (e) {
      if (!mediation) showError('The passkey was not used. Try again or choose another method.');
      return;
    }
    const res = await postJSON('/signin/passkey/verify', { challenge_id: opts.data.challenge_id, credential: assertionJSON(cred), return_to: returnTo || null });
    if (res.ok) done(res); else showError(problem(res, 'The passkey could not be verified.'));
  }
  function explicitPasskey() {
    clearErrors();
    if (conditional) { conditional.abort(); conditional = null; }
    passkeySignIn(false);
  }

  $('email-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const email = $('email').value.trim();
    if (!email || !email.includes('@')) { showError('Enter your e-mail address, like name@example.com.', 'email'); return; }
    state.email = email;
    const res = await postJSON('/signin/start', { email, return_to: returnTo });
    if (!res.ok) { showError(problem(res, 'Something went wrong; try again.'), 'email'); return; }
    document.querySelectorAll('.who').forEach((el) => { el.textContent = email; });
    if (res.data.next === 'sso') {
      const link = $('sso-button');
      link.href = res.data.provider.url;
      link.textContent = 'Continue with ' + res.data.provider.name;
      // The identity provider replaces the password field: it is removed, not merely hidden.
      const pw = $('password-form');
      if (pw) pw.remove();
      show('step-sso', 'sso-button');
    } else {
      show('step-methods', res.data.methods.includes('passkey') ? 'method-passkey' : 'password');
    }
  });

  $('passkey-button').addEventListener('click', explicitPasskey);
  $('method-passkey').addEventListener('click', explicitPasskey);

  $('password-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const password = $('password').value;
    if (!password) { showError('Enter your password.', 'password'); return; }
    const res = await postJSON('/signin/password', { email: state.email, password, return_to: returnTo || null });
    if (!res.ok) { showError(problem(res, 'The e-mail address or password is not right.'), 'password'); return; }
    secondStepOrDone(res);
  });

  $('method-code').addEventListener('click', async () => {
    clearErrors();
    const res = await postJSON('/signin/email-code', { email: state.email });
    if (!res.ok && res.status !== 202) { showError(problem(res, 'The code could not be sent.')); return; }
    show('step-code', 'code');
  });

  $('code-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const code = $('code').value.trim();
    if (!code) { showError('Enter the code from the e-mail.', 'code'); return; }
    const res = await postJSON('/signin/email-code/verify', { email: state.email, code, return_to: returnTo || null });
    if (res.ok) secondStepOrDone(res); else showError(problem(res, 'The code is not right or has expired.'), 'code');
  });

  $('mfa-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const code = $('mfa-code').value.trim();
    if (!code) { showError('Enter a code from your authenticator app or a recovery code.', 'mfa-code'); return; }
    const res = await postJSON('/signin/mfa', { mfa_token: state.mfaToken, code });
    if (res.ok) done(res); else showError(problem(res, 'The code is not right.'), 'mfa-code');
  });

  $('mfa-key').addEventListener('click', async () => {
    clearErrors();
    const opts = await postJSON('/signin/mfa/webauthn/options', { mfa_token: state.mfaToken });
    if (!opts.ok) { showError(problem(opts, 'No security key is registered.')); return; }
    let cred;
    try {
      cred = await navigator.credentials.get({ publicKey: requestOptions(opts.data.publicKey) });
    } catch (e) { showError('The security key was not used.'); return; }
    const res = await postJSON('/signin/mfa/webauthn/verify', {
      mfa_token: state.mfaToken, challenge_id: opts.data.challenge_id, credential: assertionJSON(cred),
    });
    if (res.ok) done(res); else showError(problem(res, 'The security key could not be verified.'));
  });

  document.querySelectorAll('[data-back]').forEach((b) => b.addEventListener('click', () => {
    clearErrors();
    show('step-email', 'email');
  }));

  // Conditional UI: passkeys offered in the e-mail field's autofill, when the browser supports it.
  if (window.PublicKeyCredential && PublicKeyCredential.isConditionalMediationAvailable) {
    PublicKeyCredential.isConditionalMediationAvailable().then((ok) => {
      if (ok && root.dataset.conditional === 'on') passkeySignIn(true);
    });
  }
}());
