// The consent page: Allow or Deny a third-party application, then go where the identity service says.
'use strict';
(function () {
  const root = document.getElementById('consent');
  if (!root) return;
  const error = document.getElementById('error');
  const buttons = [document.getElementById('allow'), document.getElementById('deny')];

  async function answer(decision) {
    buttons.forEach((b) => { b.disabled = true; });
    error.hidden = true;
    let res;
    let data = {};
    try {
      res = await fetch('/oauth2/consent', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'fetch' },
        body: JSON.stringify({ request: root.dataset.request, decision }),
      });
      data = await res.json();
    } catch (e) { data = {}; }
    if (res && res.ok && data.redirect_to) { window.location.assign(data.redirect_to); return; }
    error.textContent = data.detail || 'Your answer could not be recorded. Go back to the application and start again.';
    error.hidden = false;
    error.focus();
    buttons.forEach((b) => { b.disabled = false; });
  }

  buttons[0].addEventListener('click', () => answer('allow'));
  buttons[1].addEventListener('click', () => answer('deny'));
}());
