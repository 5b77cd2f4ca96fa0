-- 0005: a placeholder on the tunnel branch only. Number 0005 belongs to another helper's branch
-- (ssh keys); this file keeps the versions without a gap until that branch is merged, and is
-- deleted then.
SELECT 1;
