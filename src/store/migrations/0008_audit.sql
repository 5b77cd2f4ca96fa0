-- 0008: the audit log of administrative changes (users, keys, projects, quotas, prices, credits,
-- cordon/drain, join tokens): who, when, what; only ever appended, read a page after a seq.

CREATE TABLE audit (
  seq INTEGER PRIMARY KEY CHECK (seq > 0),
  time_ms INTEGER NOT NULL,
  actor TEXT NOT NULL CHECK (actor <> ''),
  access_key TEXT NOT NULL,
  action TEXT NOT NULL CHECK (action <> ''),
  target TEXT NOT NULL,
  detail TEXT NOT NULL
);
