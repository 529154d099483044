<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Illuminate\Contracts\Queue\QueueableEntity;

/** What a Laravel job's payload is, for its fingerprint. */
final class Payloads
{
    /**
     * The values of the job's constructor parameters, by name (a model as
     * its class and key, which do not change when its other columns do).
     *
     * @return array<string, mixed>
     */
    public static function constructorArguments(object $job): array
    {
        $ctor = (new \ReflectionClass($job))->getConstructor();
        $out = [];
        foreach ($ctor?->getParameters() ?? [] as $p) {
            $name = $p->getName();
            if (!property_exists($job, $name)) {
                continue;
            }
            $prop = new \ReflectionProperty($job, $name);
            $prop->setAccessible(true);
            $out[$name] = $prop->isInitialized($job) ? self::value($prop->getValue($job)) : null;
        }
        return $out;
    }

    private static function value(mixed $v): mixed
    {
        if ($v instanceof QueueableEntity) {
            return ['model' => get_class($v), 'key' => $v->getQueueableId()];
        }
        if ($v instanceof \BackedEnum) {
            return $v->value;
        }
        if ($v instanceof \DateTimeInterface) {
            return $v->format(DATE_RFC3339_EXTENDED);
        }
        if (is_array($v)) {
            return array_map([self::class, 'value'], $v);
        }
        return $v;
    }
}
