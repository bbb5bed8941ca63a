/* Module placeholder so the library exists before its first source lands. */
void ul__sched_placeholder(void);
void ul__sched_placeholder(void) {}
