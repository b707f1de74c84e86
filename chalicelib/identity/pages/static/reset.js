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
      const input = document.getElementById('new-password');
      const pw = input.value;
      fieldError('new-password', '');
      // the server's rule (minlength and the hint come from it); the server checks the rest
      if ([...pw.normalize('NFKC')].length < input.minLength) {
        fieldError('new-password', document.getElementById('new-password-hint').textContent); return;
      }
      const res = await postJSON('/signin/reset/confirm', { token: form.dataset.token, new_password: pw });
      if (res.ok) { form.hidden = true; done.hidden = false; return; }
      const field = res.data && res.data.errors && res.data.errors.find((e) => e.field === 'new_password');
      fieldError('new-password', field ? 'The password ' + field.message + '.' : (res.data && res.data.detail) || 'The link is not valid any more.');
    }
  });
}());
