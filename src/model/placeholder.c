/* Module placeholder so the library exists before its first source lands. */
void ul__model_placeholder(void);
void ul__model_placeholder(void) {}
