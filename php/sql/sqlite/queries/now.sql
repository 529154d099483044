SELECT (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) AS now
