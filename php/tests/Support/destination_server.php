<?php
// A test destination in the shape of docs/DESIGN.md section 6, for
// `php -S 127.0.0.1:PORT destination_server.php`: POST /items (deduped on
// Idempotency-Key), GET /items?idempotency_key=K, DELETE /items/ID. Items
// live in the JSON file $DEST_STATE (flock), shared with the test process.
// While the file $DEST_STATE.hang exists, a POST records its item and then
// hangs (a worker can be killed mid-request).
declare(strict_types=1);

$state = getenv('DEST_STATE');
$method = $_SERVER['REQUEST_METHOD'];
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);

$answer = static function (int $status, ?array $body): void {
    http_response_code($status);
    header('Content-Type: application/json');
    echo $body === null ? '' : json_encode($body);
};

$f = fopen($state, 'c+');
flock($f, LOCK_EX);
$items = json_decode(stream_get_contents($f) ?: '{}', true) ?: [];
$write = static function (array $items) use ($f): void {
    ftruncate($f, 0);
    rewind($f);
    fwrite($f, json_encode($items, JSON_FORCE_OBJECT));
    fflush($f);
};

if ($method === 'POST' && $path === '/items') {
    $key = $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? '';
    $id = array_search($key, array_column($items, 'key', 'id'), true);
    if ($id === false) {
        $id = 'item-' . (count($items) + 1);
        $items[$id] = ['id' => $id, 'key' => $key, 'body' => file_get_contents('php://input'), 'sends' => 0];
    }
    $items[$id]['sends']++;
    $write($items);
    flock($f, LOCK_UN);
    if (file_exists("$state.hang")) {
        sleep(60);
    }
    $answer(201, ['id' => $id]);
} elseif ($method === 'GET' && $path === '/items') {
    $id = array_search($_GET['idempotency_key'] ?? '', array_column($items, 'key', 'id'), true);
    $id === false ? $answer(404, null) : $answer(200, ['id' => $id]);
} elseif ($method === 'DELETE' && str_starts_with($path, '/items/')) {
    unset($items[substr($path, 7)]);
    $write($items);
    $answer(204, null);
} else {
    $answer(404, null);
}
