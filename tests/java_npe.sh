# Description: a JVM's implicit null checks work detached in the default
# mode: a JIT-compiled method called with null 1,000 times throws 1,000
# NullPointerExceptions, natively and under `detach run`.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
unset DETACH_MODE        # the default mode, whatever the runner's pass
command -v java >/dev/null || t_skip "no java (default-jre-headless; tools/install-deps.sh installs it)"

cat > "$T_TMP/Npe.java" <<'JAVA'
public class Npe {
    static int len(int[] a) { return a.length; }   // an implicit null check once compiled
    public static void main(String[] args) {
        int[] arr = new int[3];
        long sum = 0;
        for (int i = 0; i < 100000; i++) sum += len(arr);
        int caught = 0;
        for (int i = 0; i < 1000; i++) {
            try { sum += len(null); } catch (NullPointerException e) { caught++; }
        }
        System.out.println("caught " + caught + " sum " + sum);
    }
}
JAVA
cd "$T_TMP"
# -Xbatch: compiled before the loop goes on, so the null calls hit compiled code
native=$(java -Xbatch -XX:+UnlockDiagnosticVMOptions -XX:+PrintCompilation Npe.java) ||
	t_fail "natively: java failed"
grep -q "Npe::len" <<<"$native" || t_fail "natively: Npe::len was not JIT-compiled"
grep -q "^caught 1000 sum 300000$" <<<"$native" || t_fail "natively: $(grep caught <<<"$native")"
out=$("$DETACH" run -c 1 --stats "$T_TMP/st.json" -- java -Xbatch Npe.java); rc=$?
echo "detached: exit $rc: $out"
[ $rc = 0 ] || t_fail "detached: exit $rc"
[ "$out" = "caught 1000 sum 300000" ] || t_fail "detached: '$out', natively 'caught 1000 sum 300000'"
fwd=$(t_stat "$T_TMP/st.json" forwarded)
[ "$fwd" -gt 0 ] || t_fail "detached: no forwarded calls"
t_done
