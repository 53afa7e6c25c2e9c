package redacttest

// Case31 is one credential form: its text and the secret in it.
type Case31 struct{ Name, Text, Secret string }

// Issue31 holds the credential forms issue 31 (point 5) and issue 30 found
// stored in clear; each case names the secret that must not survive.
var Issue31 = []Case31{
	{"overlapping rules", `credential: API_KEY="Zq8rT2vLx9Wp"`, "Zq8rT2vLx9Wp"},
	{"overlapping rules, short value", `credential: API_KEY="v4lu3"`, "v4lu3"},
	{"nested assignment", `secret: DB_PASSWORD=Hx7!pQ2zR`, "Hx7!pQ2zR"},
	{"netrc one line", "machine api.github.com login bob password Gh7rT2qLm9", "Gh7rT2qLm9"},
	{"netrc lines", "machine example.com\n  login alice\n  password Pw9xQ3vZ\n", "Pw9xQ3vZ"},
	{"netrc default", "default login anonymous password An0nPassw0rd", "An0nPassw0rd"},
	{"kubeconfig token", "users:\n- name: admin\n  user:\n    token: kubeadm.8f3k2j9x7q1w5e4r", "kubeadm.8f3k2j9x7q1w5e4r"},
	{"kubeconfig bare token", "    token: 8f3k2j9x7q1w5e4rT6y", "8f3k2j9x7q1w5e4rT6y"},
	{"kubeconfig client key", "    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NB", "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NB"},
	{"kubeconfig id-token", "        id-token: Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5"},
	{"de", "Mein Passwort ist hunter2hunter2", "hunter2hunter2"},
	{"de Kennwort", "Das Kennwort für den Router lautet Sonne!2024", "Sonne!2024"},
	{"de colon", "Passwort: Geheim123x", "Geheim123x"},
	{"fr", "Mon mot de passe est hunter2hunter2", "hunter2hunter2"},
	{"fr colon", "mot de passe : Soleil2024!", "Soleil2024!"},
	{"es", "Mi contraseña es hunter2hunter2", "hunter2hunter2"},
	{"es wifi", "la contraseña del wifi es CasaAzul77", "CasaAzul77"},
	{"es clave", "Mi clave es Perro2024x", "Perro2024x"},
	{"pt", "Minha senha é hunter2hunter2", "hunter2hunter2"},
	{"pt colon", "senha: Gato!9876", "Gato!9876"},
	{"it", "La mia password è hunter2hunter2", "hunter2hunter2"},
	{"it parola", "la parola d'ordine è Roma2024x", "Roma2024x"},
	{"nl", "Mijn wachtwoord is hunter2hunter2", "hunter2hunter2"},
	{"ru", "Мой пароль hunter2hunter2", "hunter2hunter2"},
	{"ru colon", "пароль: Qwerty123!", "Qwerty123!"},
	{"ru dash", "пароль от почты — Zima2024x", "Zima2024x"},
	{"zh", "我的密码是hunter2hunter2", "hunter2hunter2"},
	{"zh colon", "密码：Abc12345xyz", "Abc12345xyz"},
	{"ja", "パスワードはhunter2hunter2です", "hunter2hunter2"},
	{"ja colon", "パスワード：Sakura2024x", "Sakura2024x"},
	{"id", "Kata sandi saya adalah hunter2hunter2", "hunter2hunter2"},
	{"id password", "password saya: Rahasia2024x", "Rahasia2024x"},
	{"aws prose", "my aws secret access key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	{"api key prose", "The API key is 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"},
	{"discord bare", "MTE5ODc2NTQzMjEwOTg3NjU0Mw.GhTy7K.abcDEFghiJKLmnoPQRstuVWXyz0123456789ab", "MTE5ODc2NTQzMjEwOTg3NjU0Mw.GhTy7K.abcDEFghiJKLmnoPQRstuVWXyz0123456789ab"},
	{"discord bare in prose", "the bot token MTIzNDU2Nzg5MDEyMzQ1Njc4.Gx2y3z.a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8s9 works", "MTIzNDU2Nzg5MDEyMzQ1Njc4.Gx2y3z.a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8s9"},
}
