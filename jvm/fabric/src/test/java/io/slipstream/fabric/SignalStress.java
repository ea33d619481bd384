package io.slipstream.fabric;

/**
 * Makes the JVM raise SIGSEGV on purpose, many times: compiled code turns null checks into memory
 * accesses and handles the resulting SIGSEGV as a NullPointerException. With UCX's error-signal
 * handlers installed, the first one kills the process.
 */
final class SignalStress {
    private SignalStress() {
    }

    static long nullPointerExceptions() {
        int[][] arrays = new int[1000][];
        for (int i = 0; i < arrays.length; i += 2) {
            arrays[i] = new int[] {1};
        }
        long npes = 0;
        long sum = 0;
        for (int round = 0; round < 300; round++) {
            for (int[] array : arrays) {
                try {
                    sum += first(array);
                } catch (NullPointerException e) {
                    npes++;
                }
            }
        }
        if (sum != 300L * 500) {
            throw new AssertionError("sum " + sum);
        }
        return npes;
    }

    private static int first(int[] array) {
        return array[0];
    }
}
