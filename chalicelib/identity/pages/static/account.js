// Account security settings: passkeys, security keys, TOTP, recovery codes, password, connected apps, sessions,
// API tokens.
'use strict';
(function () {
  const { creationOptions, registrationJSON, postJSON } = window.aiplat;
  const $ = (id) => document.getElementById(id);

  function status(message, isError) {
    const box = $('status');
    box.textContent = message;
    box.className = isError ? 'error' : 'note';
    box.hidden = !message;
  }
  async function getJSON(url) {
    const res = await fetch(url, { credentials: 'same-origin', headers: { 'X-Requested-With': 'fetch' } });
    if (!res.ok) return null;
    try { return await res.json(); } catch (e) { return null; }
  }
  async function del(url) {
    const res = await fetch(url, { method: 'DELETE', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'fetch' } });
    return res.ok;
  }
  function item(list, text, onRemove, label, buttonText) {
    const li = document.createElement('li');
    const span = document.createElement('span');
    span.textContent = text;
    li.appendChild(span);
    if (onRemove) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary small';
      b.textContent = buttonText || 'Remove';
      b.setAttribute('aria-label', label);
      b.addEventListener('click', onRemove);
      li.appendChild(b);
    }
    list.appendChild(li);
  }
  function fill(listId, rows, empty) {
    const list = $(listId);
    list.textContent = '';
    if (!rows.length) item(list, empty);
    return list;
  }

  async function loadCredentials(kind, path, listId) {
    const data = await getJSON(path);
    const rows = (data && data.credentials) || [];
    const list = fill(listId, rows, kind === 'passkey' ? 'No passkeys yet.' : 'No security keys yet.');
    rows.forEach((c) => item(list, c.name + ' · added ' + c.created_at.slice(0, 10), async () => {
      if (await del(path + '/' + encodeURIComponent(c.id))) { status('Removed ' + c.name + '.'); loadCredentials(kind, path, listId); }
    }, 'Remove ' + c.name));
  }

  async function addCredential(kind, path, listId, name) {
    status('');
    const opts = await postJSON(path + '/options');
    if (!opts.ok) { status((opts.data && opts.data.detail) || 'Could not start.', true); return; }
    let cred;
    try {
      cred = await navigator.credentials.create({ publicKey: creationOptions(opts.data.publicKey) });
    } catch (e) { status('The authenticator was not used.', true); return; }
    const res = await postJSON(path, { challenge_id: opts.data.challenge_id, credential: registrationJSON(cred), name });
    if (res.ok) { status((kind === 'passkey' ? 'Passkey' : 'Security key') + ' added.'); loadCredentials(kind, path, listId); }
    else status((res.data && res.data.detail) || 'The authenticator could not be verified.', true);
  }

  async function loadSessions() {
    const data = await getJSON('/account/sessions');
    const rows = (data && data.sessions) || [];
    const list = fill('sessions', rows, 'No other sessions.');
    rows.forEach((s) => item(list, (s.user_agent || 'Browser') + (s.current ? ' (this one)' : '') + ' · ' + (s.created_at || ''),
      s.current ? null : async () => { if (await del('/account/sessions/' + encodeURIComponent(s.id))) loadSessions(); },
      'Sign out this session', 'Sign out'));
  }

  async function loadTokens() {
    const data = await getJSON('/account/api-tokens');
    const rows = (data && data.api_tokens) || [];
    const list = fill('api-tokens', rows, 'No API tokens.');
    rows.forEach((t) => item(list, t.name + ' · ' + (t.workspace_id || '') + ' · ' + t.status + ' · expires ' + (t.expires_at || ''),
      t.status !== 'active' ? null
        : async () => { if (await del('/account/api-tokens/' + encodeURIComponent(t.id))) loadTokens(); }, 'Revoke ' + t.name, 'Revoke'));
  }

  function describeApp(a) {
    const where = a.workspaces.map((w) => (w.workspace_name || w.workspace_id || 'no workspace')
      + (w.role ? ' as ' + w.role : '') + ': ' + w.scopes.join(' ') + ' (' + w.resources.join(', ') + ')').join('; ');
    return a.name + (a.self_declared ? ' (name given by the app itself)' : '')
      + (a.redirect_hosts.length ? ' · sends you to ' + a.redirect_hosts.join(', ') : '')
      + ' · ' + where + ' · last used ' + (a.last_used_at ? a.last_used_at.slice(0, 16).replace('T', ' ') : 'never');
  }

  async function loadApps() {
    const data = await getJSON('/account/connected-apps');
    const rows = (data && data.connected_apps) || [];
    const list = fill('connected-apps', rows, 'No connected apps.');
    rows.forEach((a) => item(list, describeApp(a), async () => {
      if (await del('/account/connected-apps/' + encodeURIComponent(a.id))) { status('Revoked ' + a.name + '.'); loadApps(); }
    }, 'Revoke ' + a.name, 'Revoke'));
  }

  function fieldError(id, message) {
    const box = $(id + '-error');
    box.textContent = message || '';
    box.hidden = !message;
    if (message) $(id).setAttribute('aria-invalid', 'true'); else $(id).removeAttribute('aria-invalid');
  }
  function showCodes(codes) {
    const list = $('recovery-codes');
    list.textContent = '';
    codes.forEach((c) => item(list, c));
    list.hidden = false;
  }

  async function loadTotp() {
    const data = await getJSON('/account');
    const m = (data && data.mfa) || {};
    $('totp-state').textContent = m.totp ? 'An authenticator app is set up.' : 'No authenticator app is set up.';
    $('totp-start').hidden = !!m.totp;
    $('recovery-form').hidden = !m.totp;
    $('recovery-state').textContent = m.totp
      ? (m.recovery_codes_left || 0) + ' unused recovery codes left.'
      : 'Recovery codes are created when you set up an authenticator app.';
    const select = $('token-workspace');
    select.textContent = '';
    ((data && data.workspaces) || []).forEach((w) => {
      const o = document.createElement('option');
      o.value = w.workspace_id; o.textContent = w.workspace_id + ' (' + w.role + ')';
      select.appendChild(o);
    });
  }

  $('totp-start').addEventListener('click', async () => {
    const res = await postJSON('/account/totp/setup', {});
    if (!res.ok) { status((res.data && res.data.detail) || 'Could not start.', true); return; }
    $('totp-secret').textContent = res.data.secret;
    const uri = String(res.data.otpauth_uri || '');
    if (uri.startsWith('otpauth://')) $('totp-link').setAttribute('href', uri);
    const qr = document.createElement('template');
    qr.innerHTML = String(res.data.qr_svg || ''); // the server's segno SVG: paths only
    $('totp-qr').replaceChildren(...[...qr.content.childNodes].filter((n) => n.nodeName.toLowerCase() === 'svg'));
    $('totp-form').hidden = false;
    $('totp-code').focus();
  });
  $('totp-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    fieldError('totp-code', '');
    const res = await postJSON('/account/totp/confirm', { code: $('totp-code').value.trim() });
    if (!res.ok) { fieldError('totp-code', (res.data && res.data.detail) || 'The code is not right.'); return; }
    $('totp-form').hidden = true;
    status('Authenticator app turned on. Store your recovery codes now.');
    showCodes(res.data.recovery_codes || []);
    loadTotp();
  });
  $('recovery-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    fieldError('recovery-totp', '');
    const res = await postJSON('/account/recovery-codes', { code: $('recovery-totp').value.trim() });
    if (!res.ok) { fieldError('recovery-totp', (res.data && res.data.detail) || 'The code is not right.'); return; }
    showCodes(res.data.recovery_codes || []);
    loadTotp();
  });
  $('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    fieldError('token-name', '');
    const name = $('token-name').value.trim();
    if (!name) { fieldError('token-name', 'Give the token a name.'); return; }
    const res = await postJSON('/account/api-tokens', {
      name, workspace_id: $('token-workspace').value, expires_in_days: parseInt($('token-days').value, 10) || 30,
    });
    if (!res.ok) { fieldError('token-name', (res.data && res.data.detail) || 'The token was not created.'); return; }
    $('token-value').value = res.data.token;
    $('token-created').hidden = false;
    loadTokens();
  });

  async function loadPassword() {
    const me = await getJSON('/account');
    if (!me) return;
    if (me.idp) { $('password-state').textContent = 'Your organisation\'s identity provider manages your password.'; $('password-form').hidden = true; return; }
    $('password-state').textContent = me.has_password ? 'You have a password. Change it here.' : 'You have no password yet; you can sign in without one.';
  }
  $('password-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    fieldError('current-password', ''); fieldError('new-password', '');
    const input = $('new-password');
    if ([...input.value.normalize('NFKC')].length < input.minLength) { fieldError('new-password', $('new-password-hint').textContent); return; }
    const res = await postJSON('/account/password', { current_password: $('current-password').value || undefined, new_password: input.value });
    if (!res.ok) {
      const errs = (res.data && res.data.errors) || [];
      const cur = errs.find((e) => e.field === 'current_password');
      const nw = errs.find((e) => e.field === 'new_password');
      if (cur) fieldError('current-password', 'The current password ' + cur.message + '.');
      else if (res.data && res.data.code === 'invalid_current_password') fieldError('current-password', res.data.detail);
      else fieldError('new-password', nw ? 'The password ' + nw.message + '.' : (res.data && res.data.detail) || 'The password was not changed.');
      return;
    }
    $('password-form').reset();
    status('Password set.' + (res.data.other_sessions_signed_out ? ' Your other sessions were signed out.' : ''));
    loadPassword();
  });

  $('add-passkey').addEventListener('click', () => addCredential('passkey', '/account/passkeys', 'passkeys', 'Passkey'));
  $('add-security-key').addEventListener('click', () => addCredential('security_key', '/account/security-keys', 'security-keys', 'Security key'));
  $('signout').addEventListener('click', async () => {
    await postJSON('/signout');
    window.location.assign('/signin');
  });

  loadCredentials('passkey', '/account/passkeys', 'passkeys');
  loadCredentials('security_key', '/account/security-keys', 'security-keys');
  loadSessions();
  loadApps();
  loadTokens();
  loadTotp();
  loadPassword();
}());
