-- The collations of the identity columns as the tables stand: each must
-- compare bytewise with trailing spaces significant (utf8mb4_nopad_bin;
-- MySQL 8: utf8mb4_0900_bin), or `k`, `K` and `k ` would be one operation.
-- The clients check it after migrate, so tables made by hand or converted
-- (ALTER TABLE ... CONVERT TO CHARACTER SET) are refused. No binds.
SELECT CAST(table_name AS CHAR) AS table_name, CAST(column_name AS CHAR) AS column_name,
       CAST(collation_name AS CHAR) AS collation_name
FROM information_schema.columns
WHERE table_schema = DATABASE()
  AND table_name IN ('onceonly_ops', 'onceonly_audit')
  AND column_name IN ('job_type', 'op_key')
ORDER BY table_name, column_name
