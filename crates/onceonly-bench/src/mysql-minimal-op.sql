INSERT INTO op_record(job_type, op_key, state, owner, claimed_at, lease_until) VALUES ('send_email', @k := UUID(), 'claimed', 'w', NOW(6), NOW(6) + INTERVAL 60 SECOND);
UPDATE op_record SET state='completed', completed_at=NOW(6), external_ref='x' WHERE job_type='send_email' AND op_key = @k AND state='claimed' AND owner='w' AND token=1;
