<?php
require_once 'Illuminate/autoload.php';
require_once __DIR__ . '/../../../autoload.php';
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'App\\')) {
        $file = __DIR__ . '/../app/' . str_replace('\\', '/', substr($class, 4)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

@mkdir(__DIR__ . '/cache', 0777, true); // Laravel writes its package manifest there
$app = new Illuminate\Foundation\Application(dirname(__DIR__));
$app->useStoragePath(getenv('APP_STORAGE') ?: dirname(__DIR__) . '/storage');
$app->singleton(Illuminate\Contracts\Console\Kernel::class, App\Console\Kernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, Illuminate\Foundation\Exceptions\Handler::class);
return $app;
