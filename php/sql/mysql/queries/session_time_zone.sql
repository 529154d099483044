-- The session's clock zone, so that UNIX_TIMESTAMP(NOW(6)) reads the clock
-- back without a daylight-saving fold. sqlx sets it on every connection
-- itself; the other clients' drivers (PyMySQL, mysqlclient, mysql2, PDO)
-- run this at connect.
SET time_zone = '+00:00'
