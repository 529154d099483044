<?php

declare(strict_types=1);

namespace Onceonly;

/** How every client prints a database URL (protocol/corpus/db_urls.json). */
final class DbUrl
{
    private const SECRET_PARAMS = ['password', 'sslpassword', 'passfile'];

    /**
     * The URL with every password replaced by `***`, safe to print: the
     * password of `user:pass@` (up to the last `@`) and the values of the
     * query's password, sslpassword and passfile; text that is no URL but
     * holds `@` or `=` is not shown at all.
     */
    public static function redact(string $url): string
    {
        if (!preg_match('/\A([A-Za-z][A-Za-z0-9+.\-]*):/', $url, $m)) {
            return (str_contains($url, '@') || str_contains($url, '=')) ? '***' : $url;
        }
        $scheme = $m[1];
        $rest = substr($url, strlen($m[0]));
        $slashes = str_starts_with($rest, '//') ? '//' : '';
        $body = self::maskQuery(substr($rest, strlen($slashes)));
        $at = strrpos($body, '@');
        if ($at !== false) {
            $colon = strpos(substr($body, 0, $at), ':');
            if ($colon !== false) {
                $body = substr($body, 0, $colon) . ':***' . substr($body, $at);
            }
        }
        return "$scheme:$slashes$body";
    }

    private static function maskQuery(string $body): string
    {
        $q = strpos($body, '?');
        if ($q === false) {
            return $body;
        }
        $pairs = [];
        foreach (explode('&', substr($body, $q + 1)) as $pair) {
            $eq = strpos($pair, '=');
            if ($eq !== false && in_array(strtolower(trim(urldecode(substr($pair, 0, $eq)))), self::SECRET_PARAMS, true)) {
                $pair = substr($pair, 0, $eq) . '=***';
            }
            $pairs[] = $pair;
        }
        return substr($body, 0, $q) . '?' . implode('&', $pairs);
    }
}
