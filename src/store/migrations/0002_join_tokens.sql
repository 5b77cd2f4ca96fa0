-- 0002: join tokens, and agent credentials. An agent that joins with a token gets an access key
-- of its own that belongs to its node instead of a user: `node` and `join_token_id` are set and
-- `user_id` is empty (a user's key keeps both new columns empty). A token's secret is kept only as
-- a digest: the server has to recognise it, never to use it.

ALTER TABLE access_keys ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE access_keys ADD COLUMN join_token_id TEXT NOT NULL DEFAULT '';

CREATE TABLE join_tokens (
  id            TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
  secret_digest TEXT NOT NULL CHECK (secret_digest <> ''),
  description   TEXT NOT NULL,
  created_by    TEXT NOT NULL,
  created_ms    INTEGER NOT NULL,
  expires_ms    INTEGER NOT NULL,
  revoked_ms    INTEGER NOT NULL
) STRICT;
