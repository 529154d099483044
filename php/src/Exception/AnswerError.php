<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A destination's answer that breaks a rule (protocol/corpus/answers.json). */
class AnswerError extends OnceonlyException
{
    /** @param string $rule too_long or control */
    public function __construct(public readonly string $rule, string $message)
    {
        parent::__construct($message);
    }
}
