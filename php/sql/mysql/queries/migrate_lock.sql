-- A named lock of the session, per database (DDL commits at once in MySQL,
-- so no transaction can hold it): two processes migrating the same database
-- apply each migration once. ? is how long to wait, in seconds. 1: held.
SELECT GET_LOCK(CONCAT('onceonly.migrate:', SHA1(DATABASE())), ?) AS got
