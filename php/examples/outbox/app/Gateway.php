<?php

namespace App;

/**
 * The example's destination: a file with one JSON line per item sent
 * (env GATEWAY_LOG), standing in for the chat or mail provider of the seed.
 * GATEWAY_DELAY_MS keeps the request open after the item was sent, so a
 * kill -9 lands between "sent" and "recorded".
 */
class Gateway
{
    public function send(string $target, string $body, string $idempotencyKey): array
    {
        $id = 'msg-' . bin2hex(random_bytes(4));
        $line = json_encode(['id' => $id, 'target' => $target, 'body' => $body, 'key' => $idempotencyKey, 'pid' => getmypid()]);
        file_put_contents((string) (getenv('GATEWAY_LOG') ?: sys_get_temp_dir() . '/outbox-gateway.log'), "$line\n", FILE_APPEND | LOCK_EX);
        usleep(1000 * (int) getenv('GATEWAY_DELAY_MS'));
        return ['id' => $id];
    }

    public function delete(string $id): bool
    {
        file_put_contents((string) (getenv('GATEWAY_LOG') ?: sys_get_temp_dir() . '/outbox-gateway.log'), json_encode(['deleted' => $id]) . "\n", FILE_APPEND | LOCK_EX);
        return true;
    }
}
