-- The database's clock in ms since the epoch, plus the store's offset (?).
-- NOW(6): NOW() has no fraction. The session's time_zone is +00:00 (set at
-- connect), so UNIX_TIMESTAMP reads it back without a DST fold.
SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now
