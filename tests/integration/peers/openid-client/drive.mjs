// Drives the identity service with openid-client (a strict, certified relying party library) and prints
// what each step saw as one JSON object. Input: the JSON in OPENID_CLIENT_INPUT (issuer, client_id,
// client_secret, redirect_uri, cookie of a signed-in browser session, other_workspace_id,
// foreign_workspace_id). The Python test (tests/integration/identity/test_openid_client.py) asserts.
import * as client from 'openid-client';

const input = JSON.parse(process.env.OPENID_CLIENT_INPUT);
const insecure = { execute: [client.allowInsecureRequests] }; // http on loopback only
const out = {};

function failure(err) {
  return { name: err?.constructor?.name, code: err?.code, error: err?.error, status: err?.status,
           description: err?.error_description, message: String(err?.message ?? err),
           cause: err?.cause === undefined ? undefined : String(err.cause?.message ?? JSON.stringify(err.cause)) };
}

async function step(name, fn) {
  try {
    out[name] = { ok: true, value: await fn() };
  } catch (err) {
    out[name] = { ok: false, ...failure(err) };
  }
  return out[name];
}

async function authorizeInBrowser(config, extra = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: input.redirect_uri, scope: 'openid email profile offline_access', state, nonce,
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', ...extra,
  });
  const r = await fetch(url, { redirect: 'manual', headers: { cookie: input.cookie } });
  const location = r.headers.get('location');
  if (r.status !== 302 || !location?.startsWith(input.redirect_uri)) {
    throw new Error(`authorize answered ${r.status} ${location}`);
  }
  return { callback: new URL(location), verifier, state, nonce };
}

const config = await client.discovery(new URL(input.issuer), input.client_id, input.client_secret,
                                      client.ClientSecretBasic(input.client_secret), insecure);
out.discovery = { issuer: config.serverMetadata().issuer,
                  auth_methods: config.serverMetadata().token_endpoint_auth_methods_supported };

// Reuse detection signs the browser session out (docs/decisions.md), so the reuse steps come last.
const flow = await authorizeInBrowser(config);
const first = await step('code_grant', async () => {
  const tokens = await client.authorizationCodeGrant(config, flow.callback, {
    pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
  return { ...tokens, claims: tokens.claims() };
});
if (!first.ok) { console.log(JSON.stringify(out)); process.exit(0); }
const live = first.value;
await step('userinfo', () => client.fetchUserInfo(config, live.access_token, live.claims.sub));
await step('userinfo_wrong_subject', () => client.fetchUserInfo(config, live.access_token, 'usr_someone_else'));
await step('introspect', () => client.tokenIntrospection(config, live.access_token));
const refreshed = await step('refresh', () => client.refreshTokenGrant(config, live.refresh_token));

const flow3 = await authorizeInBrowser(config);
const third = await step('code_grant_3', () => client.authorizationCodeGrant(config, flow3.callback, {
  pkceCodeVerifier: flow3.verifier, expectedState: flow3.state, expectedNonce: flow3.nonce }));
const grant3 = third.value;
const exchangeType = 'urn:ietf:params:oauth:grant-type:token-exchange';
const accessType = 'urn:ietf:params:oauth:token-type:access_token';
await step('exchange', () => client.genericGrantRequest(config, exchangeType, {
  subject_token: grant3.access_token, subject_token_type: accessType, workspace_id: input.other_workspace_id }));
await step('exchange_foreign', () => client.genericGrantRequest(config, exchangeType, {
  subject_token: grant3.access_token, subject_token_type: accessType, workspace_id: input.foreign_workspace_id }));
await step('exchange_missing_subject', () => client.genericGrantRequest(config, exchangeType, {
  subject_token_type: accessType, workspace_id: input.other_workspace_id }));
await step('revoke', () => client.tokenRevocation(config, grant3.refresh_token));
await step('refresh_after_revoke', () => client.refreshTokenGrant(config, grant3.refresh_token));
await step('introspect_after_revoke', () => client.tokenIntrospection(config, grant3.access_token));
await step('userinfo_after_revoke', () => client.fetchUserInfo(config, grant3.access_token, client.skipSubjectCheck));

// the same client with a wrong secret, and with client_secret_post
const wrong = new client.Configuration(config.serverMetadata(), input.client_id, 'wrong-secret',
                                       client.ClientSecretBasic('wrong-secret'));
client.allowInsecureRequests(wrong);
await step('wrong_secret', () => client.refreshTokenGrant(wrong, 'rt_whatever'));
const post = new client.Configuration(config.serverMetadata(), input.client_id, input.client_secret,
                                      client.ClientSecretPost(input.client_secret));
client.allowInsecureRequests(post);
const flow4 = await authorizeInBrowser(post);
await step('client_secret_post', async () => {
  const t = await client.authorizationCodeGrant(post, flow4.callback, {
    pkceCodeVerifier: flow4.verifier, expectedState: flow4.state, expectedNonce: flow4.nonce });
  return { token_type: t.token_type, has_id_token: Boolean(t.id_token) };
});

// reuse of a rotated refresh token, then of a used code: both invalid_grant, and the grant is revoked
await step('refresh_reuse', () => client.refreshTokenGrant(config, live.refresh_token));
await step('introspect_after_reuse', () => client.tokenIntrospection(config, refreshed.value?.access_token ?? ''));
await step('code_reuse', () => client.authorizationCodeGrant(config, flow.callback, {
  pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce }));

console.log(JSON.stringify(out));
