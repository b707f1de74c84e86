// A real OpenID provider (npm oidc-provider) for the corporate-SSO tests, on 127.0.0.1 only.
// Configuration comes from the environment:
//   PORT     port to listen on (required)
//   ISSUER   issuer identifier (default http://127.0.0.1:PORT)
//   CLIENTS  JSON list of static clients [{client_id, client_secret, redirect_uris}]
//   ACCOUNT  JSON claims of the one test user, e.g. {"sub":"u1","email":"a@b.c","email_verified":true,"hd":"b.c"}
//   JWKS     optional JSON {"keys":[private JWK]} so two instances can share signing keys
// The interaction is custom: every login prompt signs in ACCOUNT, every consent prompt grants the
// requested scopes, so a browser or an HTTP client with a cookie jar completes the flow unattended.
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
if (!port) throw new Error('PORT is required');
const issuer = process.env.ISSUER || `http://127.0.0.1:${port}`;
const clients = JSON.parse(process.env.CLIENTS || '[]');
const account = JSON.parse(process.env.ACCOUNT || '{"sub":"user-1","email":"user@example.com"}');

const configuration = {
  clients,
  features: { devInteractions: { enabled: false } },
  pkce: { required: () => true },
  conformIdTokenClaims: false,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified', 'hd'],
    profile: ['name'],
  },
  cookies: { keys: ['loopback-test-cookie-key'] },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ ...account, sub: id }),
  }),
};
if (process.env.JWKS) configuration.jwks = JSON.parse(process.env.JWKS);

const provider = new Provider(issuer, configuration);
provider.proxy = false;

provider.use(async (ctx, next) => {
  if (ctx.path.startsWith('/interaction/')) {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    let result;
    if (details.prompt.name === 'login') {
      result = { login: { accountId: account.sub } };
    } else {
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      grant.addOIDCScope(details.params.scope);
      result = { consent: { grantId: await grant.save() } };
    }
    const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
    ctx.status = 303;
    ctx.redirect(to);
    return;
  }
  await next();
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider ready at ${issuer}`);
});
