package io.slipstream.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SettingTest {
    enum Mode { AUTO, NEVER }

    @Test
    void enumValuesAreCaseInsensitiveAndBadOnesNameTheKeyAndTheChoices() {
        assertEquals(Mode.NEVER, Setting.parseEnum(Mode.class, " Never ", "x.fallback"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Setting.parseEnum(Mode.class, "maybe", "x.fallback"));
        assertTrue(e.getMessage().equals("x.fallback=maybe: expected one of [auto, never]"), e.getMessage());
    }
}
