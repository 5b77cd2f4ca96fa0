-- 0010: the SSH public keys a user registered (gpupool ssh-key add), as a JSON array of
-- {name, public_key, fingerprint, created_ms}. Existing users have none.

ALTER TABLE users ADD COLUMN ssh_keys TEXT NOT NULL DEFAULT '[]';
