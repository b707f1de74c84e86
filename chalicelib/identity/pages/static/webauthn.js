// WebAuthn helpers shared by the sign-in and account pages: JSON <-> ArrayBuffer conversions.
'use strict';
const b64u = {
  toBuf(s) {
    const pad = '='.repeat((4 - (s.length % 4)) % 4);
    const bin = atob((s + pad).replace(/-/g, '+').replace(/_/g, '/'));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
  },
  fromBuf(buf) {
    let bin = '';
    new Uint8Array(buf).forEach((b) => { bin += String.fromCharCode(b); });
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  },
};

function creationOptions(pk) {
  return Object.assign({}, pk, {
    challenge: b64u.toBuf(pk.challenge),
    user: Object.assign({}, pk.user, { id: b64u.toBuf(pk.user.id) }),
    excludeCredentials: (pk.excludeCredentials || []).map((c) => Object.assign({}, c, { id: b64u.toBuf(c.id) })),
  });
}

function requestOptions(pk) {
  return Object.assign({}, pk, {
    challenge: b64u.toBuf(pk.challenge),
    allowCredentials: (pk.allowCredentials || []).map((c) => Object.assign({}, c, { id: b64u.toBuf(c.id) })),
  });
}

// The JSON shape of a credential (WebAuthn Level 3 toJSON) with the given response fields.
function credentialJSON(cred, response) {
  return {
    id: cred.id, rawId: b64u.fromBuf(cred.rawId), type: cred.type,
    authenticatorAttachment: cred.authenticatorAttachment || undefined,
    clientExtensionResults: cred.getClientExtensionResults(),
    response: Object.assign({ clientDataJSON: b64u.fromBuf(cred.response.clientDataJSON) }, response),
  };
}

function registrationJSON(cred) {
  const r = cred.response;
  return credentialJSON(cred, {
    attestationObject: b64u.fromBuf(r.attestationObject),
    transports: r.getTransports ? r.getTransports() : [],
  });
}

function assertionJSON(cred) {
  const r = cred.response;
  return credentialJSON(cred, {
    authenticatorData: b64u.fromBuf(r.authenticatorData),
    signature: b64u.fromBuf(r.signature),
    userHandle: r.userHandle ? b64u.fromBuf(r.userHandle) : null,
  });
}

async function postJSON(url, body) {
  const res = await fetch(url, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Requested-With': 'fetch' },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await res.json(); } catch (e) { data = {}; }
  return { ok: res.ok, status: res.status, data };
}

window.aiplat = { b64u, creationOptions, requestOptions, registrationJSON, assertionJSON, postJSON };
