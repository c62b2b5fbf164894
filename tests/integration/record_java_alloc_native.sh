#!/usr/bin/env bash
# ember record -e alloc on a JVM whose native code allocates: equal volumes
# of byte[] from Java (AllocNative.allocJava, site A) and from C code
# through JNI (AllocNative.nativeAlloc -> Java_AllocNative_nativeAlloc ->
# make_buffers -> NewByteArray, site B; tests/java/allocnative.c). Site B's
# stacks carry the C frames between the native method's Java frame and the
# class, then the JNI function in libjvm; site A's carry none; 1:1 (±10%).
. "$(dirname "$0")/../lib.sh"
need_bpf
JNI=$ROOT/build/java
[ -f "$JNI/liballocnative.so" ] || fail "no $JNI/liballocnative.so: make build/java/liballocnative.so"
java_classes "$TMP/classes"

# A sample every 4 KiB (each array about): at the default 512 KiB the two
# sites had ~70 samples each, and +-10% was half a sigma.
"$EMBER" record -e alloc --alloc-interval 4096 -o "$TMP/alloc.folded" -- java -Djava.library.path="$JNI" -cp "$TMP/classes" AllocNative 3 \
	>/dev/null 2>"$TMP/err" || fail "ember exited $?: $(cat "$TMP/err")"
# The JNI function is named from libjvm's symbol table (Debian's keeps one);
# a stripped libjvm would leave its file and offset.
jni='(jni_NewByteArray|libjvm\.so\+0x[0-9a-f]+)'
native=$(weight "$TMP/alloc.folded" \
	";AllocNative\.nativeAlloc_\[[ji0]\];Java_AllocNative_nativeAlloc;make_buffers;$jni;byte\[\] [0-9]+$")
java=$(weight "$TMP/alloc.folded" ';AllocNative\.allocJava_\[[ji0]\];byte\[\] [0-9]+$')
echo "alloc: from C through JNI $((native >> 20)) MiB, from Java $((java >> 20)) MiB (1:1 by construction)"
(( native > 0 )) || fail "no stack with the C frames under nativeAlloc: $(grep nativeAlloc "$TMP/alloc.folded" | head -3)"
(( java > 0 )) || fail "no Java allocation stack: $(head -5 "$TMP/alloc.folded")"
(( native * 100 / java >= 90 && native * 100 / java <= 110 )) || fail "native:Java = $native:$java, not 1:1 ±10%"
# All of each site's arrays are in the stacks above: no byte[] of
# nativeAlloc's without its C frames, no frame of any kind between allocJava
# and byte[]. (The JVM itself allocates now and then on these threads: a
# java.lang.String under nativeAlloc once, linking the native method, before
# any C frame exists; one under allocJava, seen once in a CI run, which
# the sampling threshold falls on rarely. Only byte[] is this test's.)
all_native=$(weight "$TMP/alloc.folded" ';AllocNative\.nativeAlloc_\[[ji0]\];.*;byte\[\] [0-9]+$')
all_java=$(weight "$TMP/alloc.folded" ';AllocNative\.allocJava_\[[ji0]\];.*byte\[\] [0-9]+$')
(( all_native == native )) || fail "nativeAlloc stacks without its C frames: $(grep nativeAlloc "$TMP/alloc.folded")"
(( all_java == java )) || fail "allocJava stacks with other frames: $(grep allocJava "$TMP/alloc.folded")"
assert_contains "$TMP/err" 'alloc: alloc samples from native code [1-9]' "no count of native samples: $(cat "$TMP/err")"
true
