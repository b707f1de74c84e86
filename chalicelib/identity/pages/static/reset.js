// Password reset pages: request a link (same answer for every address), then set a new password.
'use strict';
(function () {
  const { postJSON } = window.aiplat;
  const form = document.getElementById('reset-form');
  const done = document.getElementById('reset-done');
  function fieldError(id, message) {
    const box = document.getElementById(id + '-error');
    box.textContent = message; box.hidden = !message;
    if (message) document.getElementById(id).setAttribute('aria-invalid', 'true');
  }
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (form.dataset.mode === 'request') {
      const email = document.getElementById('email').value.trim();
      if (!email.includes('@')) { fieldError('email', 'Enter your e-mail address.'); return; }
      await postJSON('/signin/reset', { email });
      form.hidden = true; done.hidden = false;
    } else {
      const pw = document.getElementById('new-password').value;
      if (pw.length < 12) { fieldError('new-password', 'Use at least 12 characters.'); return; }
      const res = await postJSON('/signin/reset/confirm', { token: form.dataset.token, new_password: pw });
      if (res.ok) { form.hidden = true; done.hidden = false; }
      else fieldError('new-password', (res.data && res.data.detail) || 'The link is not valid any more.');
    }
  });
}());
