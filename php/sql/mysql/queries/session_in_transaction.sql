-- Whether the session has a transaction open (MariaDB; MySQL 8 has no
-- @@in_transaction and answers 1193). The clients ask it of the user's
-- connection before a local effect: inside the user's open transaction the
-- effect is a savepoint and the user's commit decides; otherwise the
-- client begins and commits. No binds.
SELECT @@in_transaction AS in_transaction
