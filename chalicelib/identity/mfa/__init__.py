"""Second factors: TOTP, recovery codes and WebAuthn, listed explicitly in ``factors.FACTORS``."""
