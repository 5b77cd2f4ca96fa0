-- 0006: a placeholder on the tunnel branch only. Number 0006 belongs to another helper's branch
-- (task arrays); this file keeps the versions without a gap until that branch is merged, and is
-- deleted then.
SELECT 1;
