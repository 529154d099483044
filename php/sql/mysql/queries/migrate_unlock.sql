SELECT RELEASE_LOCK(CONCAT('onceonly.migrate:', SHA1(DATABASE()))) AS released
