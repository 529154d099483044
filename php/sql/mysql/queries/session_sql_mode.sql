SELECT CAST(@@SESSION.sql_mode AS CHAR) AS sql_mode
