-- The session's time zone: UTC, so UNIX_TIMESTAMP(NOW(6)) reads the clock
-- back without a daylight-saving fold. sqlx sets it on every connection;
-- the clients (mysql2, PyMySQL) run this on each connection of their own.
SET time_zone = '+00:00'
