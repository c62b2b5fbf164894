/* JNI half of tests/java/AllocNative.java: fills a ring with byte arrays
 * allocated by C code, two C frames deep, so ember's allocation stacks
 * show Java_AllocNative_nativeAlloc -> make_buffers -> the JNI function
 * above the Java frame of the native method. */
#include <jni.h>

/* Not static, not inlined (the Makefile builds with -fno-inline): a frame
 * of its own with a symbol. */
void make_buffers(JNIEnv *env, jobjectArray ring, jint size)
{
	jsize n = (*env)->GetArrayLength(env, ring);
	for (jsize i = 0; i < n; i++) {
		jbyteArray a = (*env)->NewByteArray(env, size);
		if (!a)
			return; /* OutOfMemoryError pending */
		(*env)->SetObjectArrayElement(env, ring, i, a);
		(*env)->DeleteLocalRef(env, a);
	}
}

JNIEXPORT void JNICALL Java_AllocNative_nativeAlloc(JNIEnv *env, jclass cls, jobjectArray ring, jint size)
{
	(void)cls;
	make_buffers(env, ring, size);
}
