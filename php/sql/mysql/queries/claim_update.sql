-- The second half of a claim: claim the existing record if it still has the
-- token just read and is queued, due at `now` and carries the same payload.
-- It always changes the row it matches (state, token, version), so 1 means
-- claimed, with the token read + 1, under CLIENT_FOUND_ROWS and without.
-- Binds: owner, now, lease end, now, job_type, op_key, token read,
--        fingerprint, now.
UPDATE onceonly_ops SET
    state = 'claimed', token = token + 1, version = version + 1, owner = ?,
    attempts = attempts + 1, claimed_at = ?, lease_until = ?, updated_at = ?
WHERE job_type = ? AND op_key = ? AND token = ?
  AND state = 'queued'
  AND fingerprint = ?
  AND (due_at IS NULL OR due_at <= ?)
