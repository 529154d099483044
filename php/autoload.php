<?php
// The package without composer: `require 'php/autoload.php';` maps the
// PSR-4 namespace Onceonly\ to src/ (composer.json says the same).
spl_autoload_register(static function (string $class): void {
    $prefixes = ['Onceonly\\Tests\\' => __DIR__ . '/tests/', 'Onceonly\\' => __DIR__ . '/src/'];
    foreach ($prefixes as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});
